package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// JobBulk implements backend.Backend: the batch is read with FOR UPDATE and
// changed in one transaction, retried whole on a lock conflict. Cancelled
// running jobs are recorded for WatchCancels.
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	table := quoteIdent(b.database) + ".spool_jobs"
	var change string
	switch p.Action {
	case backend.BulkRetry:
		change = "UPDATE " + table + " SET state = 'available', attempt = 0, run_at = UTC_TIMESTAMP(6), finalized_at = " + neverTime + " WHERE id IN "
	case backend.BulkCancel:
		change = "UPDATE " + table + " SET state = 'cancelled', finalized_at = UTC_TIMESTAMP(6), wait_kind = NULL WHERE id IN "
	case backend.BulkDelete:
		change = "DELETE FROM " + table + " WHERE id IN "
	default:
		return nil, fmt.Errorf("bulk jobs: unknown action %d", p.Action)
	}
	conds := sqlfilter.Bulk(p, func(t time.Time) any { return sqlTime(t) })
	// Locked in id order and waited for, not skipped: the batches resume
	// after the last id taken, so a skipped row would be missed.
	query := "SELECT " + sqlfilter.BulkColumns + " FROM " + table + " WHERE id > ?" + conds.SQL() + " ORDER BY id LIMIT ? FOR UPDATE"
	args := append(append([]any{p.AfterID}, conds.Args...), p.MaxOrDefault())
	var batch *sqlfilter.Batch
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if batch, err = sqlfilter.ReadBatch(rows, p.Action); err != nil || len(batch.Change) == 0 {
			return err
		}
		if p.Action == backend.BulkCancel {
			for _, id := range batch.Running {
				if err := b.recordCancel(ctx, tx, id); err != nil {
					return err
				}
			}
		}
		r, err := tx.ExecContext(ctx, change+sqlfilter.IDList(len(batch.Change)), batch.Change...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		batch.Result.Changed = int(n)
		if err != nil || p.Action != backend.BulkCancel {
			return err
		}
		// Cancelled jobs with dependents settle them (settle skips the
		// others).
		ids := make([]int64, len(batch.Change))
		for i, id := range batch.Change {
			ids[i] = id.(int64)
		}
		return b.settle(ctx, tx, ids)
	})
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	return batch.Result, nil
}
