package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend"
)

// Durable steps, waits and signals (backend.StepStore). A wait and a
// signal on one job take turns on the job's row lock: the wait locks it
// before it reads whether the signal came, the signal before it writes
// one, and READ COMMITTED reads see what the other committed. A step's
// record holds a shared lock on the job's row while it checks the lease,
// so no finish, rescue or claim moves the job in between.

// StepRecord implements backend.StepStore.
func (b *Backend) StepRecord(ctx context.Context, p *backend.StepRecordParams) (bool, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	var ok bool
	err = b.writeIn(ctx, callerTx, func(db DBTX) error {
		var err error
		ok, err = b.recordStep(ctx, db, p)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	return ok, nil
}

// recordStep writes one step's record in db's transaction.
func (b *Backend) recordStep(ctx context.Context, db DBTX, p *backend.StepRecordParams) (bool, error) {
	q := &b.sql.steps
	var queue string
	switch err := db.QueryRowContext(ctx, q.held+" LOCK IN SHARE MODE", p.Lease.ID, p.Lease.Fence).Scan(&queue); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	if _, err := db.ExecContext(ctx, q.stepRecord, p.Lease.ID, p.Name, string(p.Result), p.Lease.Fence); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			return false, backend.ErrStepRecorded
		}
		return false, err
	}
	return true, nil
}

// StepRecordMany implements backend.StepStore: one transaction, rows
// locked in id order.
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	order := make([]int, len(p.Steps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmpID(p.Steps[x].Lease.ID, p.Steps[y].Lease.ID) })
	out := make([]backend.StepRecordResult, len(p.Steps))
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		for _, i := range order {
			ok, err := b.recordStep(ctx, tx, &p.Steps[i])
			if err != nil && !errors.Is(err, backend.ErrStepRecorded) {
				return err
			}
			out[i] = backend.StepRecordResult{Recorded: ok, Err: err}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", err)
	}
	return out, nil
}

// JobWait implements backend.StepStore.
func (b *Backend) JobWait(ctx context.Context, p *backend.JobWaitParams) (*backend.JobWaitResult, error) {
	q := &b.sql.steps
	res := &backend.JobWaitResult{}
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		*res = backend.JobWaitResult{}
		switch err := tx.QueryRowContext(ctx, q.held+" FOR UPDATE", p.Lease.ID, p.Lease.Fence).Scan(&res.Queue); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		if p.Signal != "" {
			if err := tx.QueryRowContext(ctx, q.signalSent, p.Lease.ID, p.Signal).Scan(&res.Signalled); err != nil {
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
		r, err := tx.ExecContext(ctx, q.jobWait, string(state), delay, signal, p.Lease.ID, p.Lease.Fence)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.Applied = n == 1
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("park job %d: %w", p.Lease.ID, err)
	}
	return res, nil
}

// JobSignal implements backend.StepStore.
func (b *Backend) JobSignal(ctx context.Context, p *backend.JobSignalParams) (*backend.JobSignalResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	q := &b.sql.steps
	res := &backend.JobSignalResult{}
	err = b.writeIn(ctx, callerTx, func(db DBTX) error {
		*res = backend.JobSignalResult{}
		switch err := db.QueryRowContext(ctx, q.jobLock, p.JobID).Scan(&res.Queue); {
		case errors.Is(err, sql.ErrNoRows):
			return backend.ErrNotFound
		case err != nil:
			return err
		}
		r, err := db.ExecContext(ctx, q.signalInsert, p.JobID, p.Name, string(p.Payload))
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return err
		}
		res.First = true
		r, err = db.ExecContext(ctx, q.signalWake, p.JobID, p.Name)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.Woke = n == 1
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	return res, nil
}

// JobDurable implements backend.StepStore.
func (b *Backend) JobDurable(ctx context.Context, id int64) (*backend.JobDurable, error) {
	q := &b.sql.steps
	out := &backend.JobDurable{Steps: []backend.StepRow{}, Signals: []backend.SignalRow{}}
	err := func() error {
		rows, err := b.db.QueryContext(ctx, q.stepsOf, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r := backend.StepRow{JobID: id}
			var result string
			if err := rows.Scan(&r.Name, &result, &r.Fence, &r.At); err != nil {
				return err
			}
			r.Result = []byte(result)
			out.Steps = append(out.Steps, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		sigs, err := b.db.QueryContext(ctx, q.signalsOf, id)
		if err != nil {
			return err
		}
		defer sigs.Close()
		for sigs.Next() {
			r := backend.SignalRow{JobID: id}
			var payload string
			if err := sigs.Scan(&r.Name, &payload, &r.At); err != nil {
				return err
			}
			r.Payload = []byte(payload)
			out.Signals = append(out.Signals, r)
		}
		if err := sigs.Err(); err != nil {
			return err
		}
		err = b.db.QueryRowContext(ctx, q.waitOf, id).Scan(&out.WaitSignal)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
		return err
	}()
	if err != nil {
		return nil, fmt.Errorf("read steps of job %d: %w", id, err)
	}
	return out, nil
}
