package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// PeriodicRecord implements backend.Backend: one upsert per job, each read
// back in the transaction that holds its row, in one transaction.
func (b *Backend) PeriodicRecord(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
	var out []backend.PeriodicJob
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		for _, j := range p.Jobs {
			if _, err := tx.ExecContext(ctx, b.sql.periodicRecord, j.Name, j.Schedule, j.Queue, sqlTime(j.Since),
				sqlTimeOrNull(j.LastSlot), sqlTimeOrNull(j.NextSlot), sqlTimeOrNull(j.StartedAt), sqlTimeOrNull(p.StartAfter)); err != nil {
				return err
			}
			rec, err := scanPeriodic(tx.QueryRowContext(ctx, b.sql.periodicGet, j.Name))
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record periodic jobs: %w", err)
	}
	return out, nil
}

// PeriodicList implements backend.Backend.
func (b *Backend) PeriodicList(ctx context.Context) ([]backend.PeriodicJob, error) {
	var out []backend.PeriodicJob
	err := sqlfilter.ReadRows(ctx, b.db, func(rows *sql.Rows) error {
		rec, err := scanPeriodic(rows)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	}, b.sql.periodicList)
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	return out, nil
}

// scanPeriodic reads a row of spool_periodic's columns in the statements'
// order, its times in UTC.
func scanPeriodic(row interface{ Scan(...any) error }) (backend.PeriodicJob, error) {
	var (
		j                     backend.PeriodicJob
		last, next, startedAt sql.NullTime
	)
	if err := row.Scan(&j.Name, &j.Schedule, &j.Queue, &j.Since, &last, &next, &startedAt, &j.SeenAt); err != nil {
		return j, err
	}
	j.Since, j.SeenAt = j.Since.UTC(), j.SeenAt.UTC()
	for _, f := range []struct {
		v  sql.NullTime
		to *time.Time
	}{{last, &j.LastSlot}, {next, &j.NextSlot}, {startedAt, &j.StartedAt}} {
		if f.v.Valid {
			*f.to = f.v.Time.UTC()
		}
	}
	return j, nil
}

// sqlTimeOrNull is t as the statements bind times, or NULL for the zero time.
func sqlTimeOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return sqlTime(t)
}
