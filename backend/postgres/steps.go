package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/backend"
)

// Durable steps, waits and signals (backend.StepStore, schema 22). A
// running job is either in place in spool_jobs or in a lease row; the
// fenced writes here act on the row in place, and move a job out of its
// lease row first (spool_unlease) when they do not find it, as JobRecord
// does. A wait and a signal on one job take turns on spool_signal_lock.

// unlease moves the job id out of its lease row, if one holds it, on the
// connection db; it reports whether it moved it.
func (b *Backend) unlease(ctx context.Context, db DBTX, id int64) (bool, error) {
	var moved int
	err := db.QueryRow(ctx, b.sql.unleaseJobs, []int64{id}).Scan(&moved)
	return moved > 0, err
}

// StepRecord implements backend.StepStore.
func (b *Backend) StepRecord(ctx context.Context, p *backend.StepRecordParams) (bool, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	q := &b.sql.steps
	record := func() (bool, error) {
		tag, err := db.Exec(ctx, q.stepRecord, p.Lease.ID, p.Lease.Fence, p.Name, string(p.Result))
		return tag.RowsAffected() == 1, err
	}
	ok, err := record()
	if err == nil && !ok {
		var held bool
		if err = db.QueryRow(ctx, q.held, p.Lease.ID, p.Lease.Fence).Scan(&held); err == nil {
			if held {
				err = backend.ErrStepRecorded
			} else {
				// Moved on the pool, committed at once: a caller's
				// transaction then sees the job in place.
				var moved bool
				if moved, err = b.unlease(ctx, b.pool, p.Lease.ID); err == nil && moved {
					ok, err = record()
				}
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, ownWriteError(p.Tx == nil, err))
	}
	return ok, nil
}

// StepRecordMany implements backend.StepStore: one transaction that
// records each step in place, in id order, then moves the jobs it did not
// find in place out of their lease rows in one statement (one lock per
// lease row, not one per job) and records theirs.
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	if len(p.Steps) == 0 {
		return nil, nil
	}
	q := &b.sql.steps
	order := make([]int, len(p.Steps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(p.Steps[x].Lease.ID, p.Steps[y].Lease.ID) })
	out := make([]backend.StepRecordResult, len(p.Steps))
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		// record tries the steps at idx in place and returns those whose
		// lease holds no job in place (their job may be in a lease row).
		record := func(idx []int) ([]int, error) {
			var absent []int
			for _, i := range idx {
				st := &p.Steps[i]
				tag, err := tx.Exec(ctx, q.stepRecord, st.Lease.ID, st.Lease.Fence, st.Name, string(st.Result))
				if err != nil {
					return nil, err
				}
				if tag.RowsAffected() == 1 {
					out[i] = backend.StepRecordResult{Recorded: true}
					continue
				}
				var held bool
				if err := tx.QueryRow(ctx, q.held, st.Lease.ID, st.Lease.Fence).Scan(&held); err != nil {
					return nil, err
				}
				out[i] = backend.StepRecordResult{}
				if held {
					out[i].Err = backend.ErrStepRecorded
				} else {
					absent = append(absent, i)
				}
			}
			return absent, nil
		}
		absent, err := record(order)
		if err != nil || len(absent) == 0 {
			return err
		}
		// A job's first step finds it in a lease row: move the batch's
		// such jobs out in one statement, then try them again.
		moving := make([]int64, 0, len(absent))
		for _, i := range absent {
			moving = append(moving, p.Steps[i].Lease.ID)
		}
		slices.Sort(moving)
		var moved int
		if err := tx.QueryRow(ctx, b.sql.unleaseJobs, slices.Compact(moving)).Scan(&moved); err != nil || moved == 0 {
			return err
		}
		_, err = record(absent)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", ownWriteError(true, err))
	}
	return out, nil
}

// JobWait implements backend.StepStore.
func (b *Backend) JobWait(ctx context.Context, p *backend.JobWaitParams) (*backend.JobWaitResult, error) {
	q := &b.sql.steps
	res := &backend.JobWaitResult{}
	var key claimKey
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		*res = backend.JobWaitResult{}
		if _, err := tx.Exec(ctx, q.signalLock, p.Lease.ID); err != nil {
			return err
		}
		if p.Signal != "" {
			if err := tx.QueryRow(ctx, q.signalSent, p.Lease.ID, p.Signal).Scan(&res.Signalled); err != nil {
				return err
			}
		}
		state, delay := backend.StateScheduled, max(p.Delay, time.Microsecond).Microseconds()
		if res.Signalled {
			state, delay = backend.StateAvailable, 0
		}
		var signal any
		if p.Signal != "" {
			signal = p.Signal
		}
		park := func() error {
			return tx.QueryRow(ctx, q.jobWait, p.Lease.ID, p.Lease.Fence, string(state), delay, signal).Scan(&res.Queue, &key.priority, &key.runAt)
		}
		err := park()
		if errors.Is(err, pgx.ErrNoRows) {
			var moved bool
			if moved, err = b.unlease(ctx, tx, p.Lease.ID); err == nil {
				err = pgx.ErrNoRows
				if moved {
					err = park()
				}
			}
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			res.Signalled = false
			return nil
		case err != nil:
			return err
		}
		res.Applied = true
		key.id = p.Lease.ID
		if res.Signalled {
			var wake queueKeys
			wake.note(res.Queue, key)
			return b.notifyDue(ctx, tx, wake)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("park job %d: %w", p.Lease.ID, ownWriteError(true, err))
	}
	if res.Applied {
		b.floors.lower(res.Queue, key)
	}
	return res, nil
}

// JobSignal implements backend.StepStore through spool_signal, the
// function SQL users call.
func (b *Backend) JobSignal(ctx context.Context, p *backend.JobSignalParams) (*backend.JobSignalResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	res := &backend.JobSignalResult{}
	err = db.QueryRow(ctx, b.sql.steps.signal, p.JobID, p.Name, string(p.Payload)).Scan(&res.First, &res.Woke, &res.Queue)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "P0002":
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, backend.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, ownWriteError(p.Tx == nil, err))
	}
	return res, nil
}

// JobDurable implements backend.StepStore.
func (b *Backend) JobDurable(ctx context.Context, id int64) (*backend.JobDurable, error) {
	q := &b.sql.steps
	out := &backend.JobDurable{Steps: []backend.StepRow{}, Signals: []backend.SignalRow{}}
	err := func() error {
		rows, err := b.pool.Query(ctx, q.stepsOf, id)
		if err != nil {
			return err
		}
		for rows.Next() {
			r := backend.StepRow{JobID: id}
			var result string
			if err := rows.Scan(&r.Name, &result, &r.Fence, &r.At); err != nil {
				rows.Close()
				return err
			}
			r.Result, r.At = []byte(result), r.At.UTC()
			out.Steps = append(out.Steps, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		sigs, err := b.pool.Query(ctx, q.signalsOf, id)
		if err != nil {
			return err
		}
		for sigs.Next() {
			r := backend.SignalRow{JobID: id}
			var payload string
			if err := sigs.Scan(&r.Name, &payload, &r.At); err != nil {
				sigs.Close()
				return err
			}
			r.Payload, r.At = []byte(payload), r.At.UTC()
			out.Signals = append(out.Signals, r)
		}
		sigs.Close()
		if err := sigs.Err(); err != nil {
			return err
		}
		err = b.pool.QueryRow(ctx, q.waitOf, id).Scan(&out.WaitSignal)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return err
	}()
	if err != nil {
		return nil, fmt.Errorf("read steps of job %d: %w", id, err)
	}
	return out, nil
}
