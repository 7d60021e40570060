package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// JobBulk implements backend.Backend: the batch is read and changed in one
// write transaction, so nothing changes in between.
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	var change string
	switch p.Action {
	case backend.BulkRetry:
		change = "UPDATE spool_jobs SET state = 'available', attempt = 0, run_at = ?, finalized_at = NULL WHERE id IN "
	case backend.BulkCancel:
		change = "UPDATE spool_jobs SET state = 'cancelled', finalized_at = ?, leased_until = NULL, leased_by = NULL, wait_kind = NULL WHERE id IN "
	case backend.BulkDelete:
		change = "DELETE FROM spool_jobs WHERE ? > 0 AND id IN " // ? takes the now every change binds first
	default:
		return nil, fmt.Errorf("bulk jobs: unknown action %d", p.Action)
	}
	conds := sqlfilter.Bulk(p, func(t time.Time) any { return t.UnixMicro() })
	query := "SELECT " + sqlfilter.BulkColumns + " FROM spool_jobs WHERE id > ?" + conds.SQL() + " ORDER BY id LIMIT ?"
	args := append(append([]any{p.AfterID}, conds.Args...), p.MaxOrDefault())
	var batch *sqlfilter.Batch
	wake := map[string]struct{}{}
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if batch, err = sqlfilter.ReadBatch(rows, p.Action); err != nil || len(batch.Change) == 0 {
			return err
		}
		r, err := tx.ExecContext(ctx, change+sqlfilter.IDList(len(batch.Change)), append([]any{nowMicros()}, batch.Change...)...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		batch.Result.Changed = int(n)
		if p.Action != backend.BulkCancel {
			return nil
		}
		// Cancelled jobs with dependents settle them (settle skips the
		// others).
		ids := make([]int64, len(batch.Change))
		for i, id := range batch.Change {
			ids[i] = id.(int64)
		}
		clear(wake)
		if err := settle(ctx, tx, ids, wake); err != nil {
			return err
		}
		if len(batch.Running) > 0 {
			return recordCancels(ctx, tx, batch.Running)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	switch p.Action {
	case backend.BulkRetry:
		for _, q := range batch.Queues {
			b.st.hub.Publish(backend.Wake{Queue: q})
		}
	case backend.BulkCancel:
		for _, id := range batch.Running {
			b.st.hub.Publish(backend.Wake{CancelledID: id})
		}
		b.st.hub.PublishQueues(wake)
	}
	return batch.Result, nil
}
