package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spoolq/spool/backend"
)

// JobFinishMany implements backend.Backend. In one transaction (the
// caller's, or a short one of its own) it locks the batch's rows by primary
// key and reads their leases, then writes only the outcomes whose lease
// holds: completions with one UPDATE (or DELETE) by id list, every other
// outcome with one UPDATE joined to a derived table of the outcomes. Knowing
// the live leases before writing is what makes the rejected list exact,
// without RETURNING (MySQL has none for UPDATE).
//
// A deadlock or lock wait timeout rolls the whole transaction back, so the
// retry starts from nothing written: it cannot complete a job twice, and
// because no write happened the job's lease still holds for the retry.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(p.Finishes) == 0 {
		return &backend.JobFinishManyResult{}, nil
	}
	fs := slices.Clone(p.Finishes)
	slices.SortFunc(fs, func(a, b backend.JobFinish) int { return cmpID(a.Lease.ID, b.Lease.ID) })
	var rejected []backend.LeaseRef
	run := func(db DBTX) error {
		var ferr error
		rejected, ferr = b.finish(ctx, db, fs, p.DeleteCompleted)
		return ferr
	}
	if callerTx != nil {
		err = run(callerTx)
	} else {
		err = b.inTx(ctx, func(tx *sql.Tx) error { return run(tx) })
	}
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return &backend.JobFinishManyResult{Rejected: rejected}, nil
}

func cmpID(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// finish writes the outcomes of fs (sorted by id) inside a transaction and
// returns the leases that did not hold.
func (b *Backend) finish(ctx context.Context, db DBTX, fs []backend.JobFinish, deleteCompleted bool) ([]backend.LeaseRef, error) {
	ids := make([]int64, 0, len(fs))
	for i, f := range fs {
		if i == 0 || f.Lease.ID != fs[i-1].Lease.ID {
			ids = append(ids, f.Lease.ID)
		}
	}
	live, err := b.liveLeases(ctx, db, b.sql.lockForFinish+inList(ids)+" FOR UPDATE", ids)
	if err != nil {
		return nil, err
	}
	var (
		rejected  []backend.LeaseRef
		completed []int64
		other     []backend.JobFinish
	)
	for _, f := range fs {
		if !live[f.Lease] {
			rejected = append(rejected, f.Lease)
			continue
		}
		delete(live, f.Lease) // a lease named twice applies once
		if f.Outcome == backend.OutcomeComplete && f.Error == nil {
			completed = append(completed, f.Lease.ID)
		} else {
			other = append(other, f)
		}
	}
	if len(completed) > 0 {
		q := b.sql.complete
		if deleteCompleted {
			q = b.sql.deleteDone
		}
		if err := execCount(ctx, db, q+inList(completed), len(completed)); err != nil {
			return nil, err
		}
	}
	if len(other) > 0 {
		input, args := finishInput(other)
		if err := execCount(ctx, db, strings.Replace(b.sql.finishOther, "{{input}}", input, 1), len(other), args...); err != nil {
			return nil, err
		}
	}
	return rejected, nil
}

// liveLeases runs query (which selects id, fence, state for ids) and returns
// the leases of running rows.
func (b *Backend) liveLeases(ctx context.Context, db DBTX, query string, ids []int64) (map[backend.LeaseRef]bool, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	live := make(map[backend.LeaseRef]bool, len(ids))
	for rows.Next() {
		var (
			l     backend.LeaseRef
			state string
		)
		if err := rows.Scan(&l.ID, &l.Fence, &state); err != nil {
			return nil, err
		}
		if backend.State(state) == backend.StateRunning {
			live[l] = true
		}
	}
	return live, rows.Err()
}

// execCount runs a write that must affect exactly want rows (all of them are
// locked by this transaction and known to be running).
func execCount(ctx context.Context, db DBTX, query string, want int, args ...any) error {
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || int(n) != want {
		return fmt.Errorf("wrote %d of %d locked rows (%v)", n, want, err)
	}
	return nil
}

// finishInput renders the outcomes as a derived table, one SELECT per row
// joined by UNION ALL: portable to every MySQL and MariaDB version (no
// VALUES table constructor, no JSON_TABLE). The first SELECT names and types
// the columns. Numbers are formatted here; error texts are bound.
func finishInput(fs []backend.JobFinish) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	for i, f := range fs {
		attempt, msg, trace := "NULL", "NULL", "NULL"
		if f.Error != nil {
			attempt, msg = strconv.Itoa(f.Error.Attempt), "?"
			args = append(args, f.Error.Error)
			if f.Error.Trace != "" {
				trace = "?"
				args = append(args, f.Error.Trace)
			}
		}
		id, outcome, delay := strconv.FormatInt(f.Lease.ID, 10), strconv.Itoa(int(f.Outcome)), strconv.FormatInt(micros(f.Delay), 10)
		if i == 0 {
			b.WriteString("SELECT " + id + " AS id, " + outcome + " AS outcome, " + delay + " AS delay_us, CAST(" +
				attempt + " AS SIGNED) AS err_attempt, CAST(" + msg + " AS CHAR CHARACTER SET utf8mb4) AS err_message, CAST(" +
				trace + " AS CHAR CHARACTER SET utf8mb4) AS err_trace")
			continue
		}
		b.WriteString("\nUNION ALL SELECT " + id + ", " + outcome + ", " + delay + ", " + attempt + ", " + msg + ", " + trace)
	}
	return b.String(), args
}
