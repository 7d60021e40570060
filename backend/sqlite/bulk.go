package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/spoolq/spool/backend"
)

// bulkSelect builds the read of one bulk batch: the first Max jobs above
// AfterID that match the filters and that the action applies to, in id
// order. The filters' shape varies, so the statement is built here; every
// value is bound.
func bulkSelect(p *backend.JobBulkParams) (string, []any) {
	var (
		q    strings.Builder
		args = []any{p.AfterID}
	)
	q.WriteString("SELECT id, state, queue, coalesce(unique_key, ''), coalesce(unique_states, 0) FROM spool_jobs WHERE id > ?")
	if p.Queue != "" {
		q.WriteString(" AND queue = ?")
		args = append(args, p.Queue)
	}
	if p.Kind != "" {
		q.WriteString(" AND kind = ?")
		args = append(args, p.Kind)
	}
	var states []backend.State
	for _, s := range backend.AllStates {
		if p.Action.Applies(s) && (len(p.States) == 0 || containsState(p.States, s)) {
			states = append(states, s)
		}
	}
	if len(states) == 0 {
		states = []backend.State{"none"} // matches no row
	}
	q.WriteString(" AND state IN (")
	for i, s := range states {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("?")
		args = append(args, string(s))
	}
	q.WriteString(")")
	if !p.CreatedAfter.IsZero() {
		q.WriteString(" AND created_at > ?")
		args = append(args, p.CreatedAfter.UnixMicro())
	}
	if !p.CreatedBefore.IsZero() {
		q.WriteString(" AND created_at < ?")
		args = append(args, p.CreatedBefore.UnixMicro())
	}
	q.WriteString(" ORDER BY id LIMIT ?")
	args = append(args, p.MaxOrDefault())
	return q.String(), args
}

func containsState(states []backend.State, s backend.State) bool {
	for _, v := range states {
		if v == s {
			return true
		}
	}
	return false
}

// JobBulk implements backend.Backend: the batch is read and changed in one
// write transaction, so nothing changes in between.
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	var change string
	switch p.Action {
	case backend.BulkRetry:
		change = "UPDATE spool_jobs SET state = 'available', attempt = 0, run_at = ?, finalized_at = NULL WHERE id IN "
	case backend.BulkCancel:
		change = "UPDATE spool_jobs SET state = 'cancelled', finalized_at = ?, leased_until = NULL, leased_by = NULL WHERE id IN "
	case backend.BulkDelete:
		change = "DELETE FROM spool_jobs WHERE ? > 0 AND id IN "
	default:
		return nil, fmt.Errorf("bulk jobs: unknown action %d", p.Action)
	}
	query, args := bulkSelect(p)
	var (
		res       *backend.JobBulkResult
		wakes     []backend.Wake
		wokeQueue map[string]bool
	)
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		res, wakes, wokeQueue = &backend.JobBulkResult{}, nil, map[string]bool{}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		var (
			ids     []any
			running []int64
		)
		for rows.Next() {
			var j backend.JobRow
			var state string
			if err := rows.Scan(&j.ID, &state, &j.Queue, &j.UniqueKey, &j.UniqueStates); err != nil {
				rows.Close()
				return err
			}
			j.State = backend.State(state)
			res.Taken++
			res.LastID = j.ID
			switch {
			case p.Action == backend.BulkRetry && backend.NeedsKeyBack(&j):
				res.UniqueRetries = append(res.UniqueRetries, j.ID)
				continue
			case p.Action == backend.BulkRetry && !wokeQueue[j.Queue]:
				wokeQueue[j.Queue] = true
				wakes = append(wakes, backend.Wake{Queue: j.Queue})
			case p.Action == backend.BulkCancel && j.State == backend.StateRunning:
				wakes = append(wakes, backend.Wake{CancelledID: j.ID})
				running = append(running, j.ID)
			}
			ids = append(ids, j.ID)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		stmt := change + "(?" + strings.Repeat(", ?", len(ids)-1) + ")"
		r, err := tx.ExecContext(ctx, stmt, append([]any{nowMicros()}, ids...)...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		res.Changed = int(n)
		if len(running) > 0 {
			return recordCancels(ctx, tx, running)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	for _, w := range wakes {
		b.st.hub.publish(w)
	}
	return res, nil
}
