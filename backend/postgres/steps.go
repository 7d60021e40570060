package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/backend"
)

// Durable steps, waits and signals (backend.StepStore, schema 22). A
// running job is either in place in spool_jobs or in a lease row. The
// batches of step records (StepRecordMany) find it in either and leave it
// there; a record in a caller's transaction (StepRecord) and a wait act
// on the row in place, and move a job out of its lease row first
// (spool_unlease) when they do not find it, as JobRecord does: such a
// record would otherwise hold its lease row, and the heartbeats and
// finishes of the row's other jobs, until the caller's commit. A job's
// step records are kept in sets (spool_step_sets, schema 25): a batch
// writes one row per job. A wait and a signal on one job take turns on
// spool_signal_lock.

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
	// recorded tells a name recorded already from a lease that does not
	// hold its job in place, when record wrote nothing.
	recorded := func() error {
		var held bool
		if err := db.QueryRow(ctx, q.held, p.Lease.ID, p.Lease.Fence).Scan(&held); err != nil {
			return err
		}
		if held {
			return backend.ErrStepRecorded
		}
		return nil
	}
	ok, err := record()
	if err == nil && !ok {
		if err = recorded(); err == nil {
			// Not in place: moved on the pool, committed at once, so
			// that a caller's transaction then sees the job in place.
			var moved bool
			if moved, err = b.unlease(ctx, b.pool, p.Lease.ID); err == nil && moved {
				if ok, err = record(); err == nil && !ok {
					err = recorded()
				}
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, ownWriteError(p.Tx == nil, err))
	}
	return ok, nil
}

// StepRecordMany implements backend.StepStore: one transaction whose one
// statement records every step whose job its lease holds, in a lease row
// or in place; a job's records leave it where it is. The steps whose job
// it found in neither are tried once more by the same statement, whose
// new snapshot sees a job moved back in place (spool_unlease) while the
// first ran: two round trips at most, whatever the batch's size.
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	if len(p.Steps) == 0 {
		return nil, nil
	}
	out := make([]backend.StepRecordResult, len(p.Steps))
	all := make([]int, len(p.Steps))
	for i := range all {
		all[i] = i
	}
	err := b.retryConflict(ctx, func() error {
		return b.recordStepsTx(ctx, p.Steps, all, out)
	})
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", ownWriteError(true, err))
	}
	return out, nil
}

// recordStepsTx is StepRecordMany's transaction.
func (b *Backend) recordStepsTx(ctx context.Context, steps []backend.StepRecordParams, all []int, out []backend.StepRecordResult) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		absent, err := b.recordSteps(ctx, tx, steps, all, out)
		if err != nil || len(absent) == 0 {
			return err
		}
		_, err = b.recordSteps(ctx, tx, steps, absent, out)
		return err
	})
}

// retryConflict runs fn, a transaction of the backend's own, again when
// the server ended it as a deadlock's victim or for a serialization
// failure: it rolled back whole, so running it again is safe. A few tries
// at most; the last error is returned.
func (b *Backend) retryConflict(ctx context.Context, fn func() error) error {
	var err error
	for try := 1; ; try++ {
		err = fn()
		var pe *pgconn.PgError
		if try == conflictTries || !errors.As(err, &pe) || (pe.Code != "40P01" && pe.Code != "40001") {
			return err
		}
		t := time.NewTimer(time.Duration(try) * 10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// conflictTries bounds retryConflict's tries.
const conflictTries = 4

// recordSteps records the steps at idx in tx by one statement, setting
// their results in out, and returns those whose lease holds no job. The
// statement returns only the steps it did not record (usually none).
func (b *Backend) recordSteps(ctx context.Context, tx pgx.Tx, steps []backend.StepRecordParams, idx []int, out []backend.StepRecordResult) ([]int, error) {
	ids := make([]int64, len(idx))
	fences := make([]int32, len(idx))
	names := make([]string, len(idx))
	results := make([]string, len(idx))
	for k, i := range idx {
		st := &steps[i]
		ids[k], fences[k], names[k], results[k] = st.Lease.ID, st.Lease.Fence, st.Name, string(st.Result)
		out[i] = backend.StepRecordResult{Recorded: true}
	}
	rows, err := tx.Query(ctx, b.sql.steps.stepRecordMany, ids, fences, names, results)
	if err != nil {
		return nil, err
	}
	var absent []int
	for rows.Next() {
		var (
			ord  int64
			held bool
		)
		if err := rows.Scan(&ord, &held); err != nil {
			rows.Close()
			return nil, err
		}
		if ord < 1 || int(ord) > len(idx) {
			rows.Close()
			return nil, fmt.Errorf("step record returned position %d of %d", ord, len(idx))
		}
		i := idx[ord-1]
		if held {
			out[i] = backend.StepRecordResult{Err: backend.ErrStepRecorded}
		} else {
			out[i] = backend.StepRecordResult{}
			absent = append(absent, i)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return absent, nil
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
