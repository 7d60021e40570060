package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// PeriodicRecord implements backend.Backend: one upsert per job, in one
// write transaction.
func (b *Backend) PeriodicRecord(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
	var out []backend.PeriodicJob
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		now := nowMicros()
		for _, j := range p.Jobs {
			row := tx.QueryRowContext(ctx, stmt.periodicRecord, j.Name, j.Schedule, j.Queue, j.Since.UnixMicro(),
				nullMicros(j.LastSlot), nullMicros(j.NextSlot), nullMicros(j.StartedAt), now, p.StartAfter.UnixMicro())
			rec, err := scanPeriodic(row)
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
	err := sqlfilter.ReadRows(ctx, b.st.readers, func(rows *sql.Rows) error {
		rec, err := scanPeriodic(rows)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	}, stmt.periodicList)
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	return out, nil
}

// scanPeriodic reads a row of spool_periodic's columns in the statements'
// order.
func scanPeriodic(row interface{ Scan(...any) error }) (backend.PeriodicJob, error) {
	var (
		j                     backend.PeriodicJob
		since, seen           int64
		last, next, startedAt sql.NullInt64
	)
	if err := row.Scan(&j.Name, &j.Schedule, &j.Queue, &since, &last, &next, &startedAt, &seen); err != nil {
		return j, err
	}
	j.Since, j.SeenAt = fromMicros(since), fromMicros(seen)
	for _, f := range []struct {
		v  sql.NullInt64
		to *time.Time
	}{{last, &j.LastSlot}, {next, &j.NextSlot}, {startedAt, &j.StartedAt}} {
		if f.v.Valid {
			*f.to = fromMicros(f.v.Int64)
		}
	}
	return j, nil
}

// nullMicros is t in microseconds, or NULL for the zero time.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}
