package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
)

// PeriodicRecord implements backend.Backend: one upsert per job, in one
// transaction.
func (b *Backend) PeriodicRecord(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
	var out []backend.PeriodicJob
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		out = out[:0]
		for _, j := range p.Jobs {
			row := tx.QueryRow(ctx, b.sql.periodicRecord, j.Name, j.Schedule, j.Queue, j.Since,
				nullTime(j.LastSlot), nullTime(j.NextSlot), nullTime(j.StartedAt), p.StartAfter)
			rec, err := scanPeriodic(row)
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record periodic jobs: %w", autocommitWriteError(err))
	}
	return out, nil
}

// PeriodicList implements backend.Backend.
func (b *Backend) PeriodicList(ctx context.Context) ([]backend.PeriodicJob, error) {
	rows, err := b.pool.Query(ctx, b.sql.periodicList)
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend.PeriodicJob, error) { return scanPeriodic(r) })
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	return out, nil
}

// scanPeriodic reads a row of spool_periodic's columns in the statements'
// order, its times in UTC.
func scanPeriodic(row pgx.Row) (backend.PeriodicJob, error) {
	var (
		j                     backend.PeriodicJob
		last, next, startedAt *time.Time
	)
	if err := row.Scan(&j.Name, &j.Schedule, &j.Queue, &j.Since, &last, &next, &startedAt, &j.SeenAt); err != nil {
		return j, err
	}
	j.Since, j.SeenAt = j.Since.UTC(), j.SeenAt.UTC()
	for _, f := range []struct {
		v  *time.Time
		to *time.Time
	}{{last, &j.LastSlot}, {next, &j.NextSlot}, {startedAt, &j.StartedAt}} {
		if f.v != nil {
			*f.to = f.v.UTC()
		}
	}
	return j, nil
}

// nullTime is t, or NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
