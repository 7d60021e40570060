package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// StepRecordMany implements backend.StepStore: one transaction of three
// statements (and one INSERT per stepRowsChunk records): the batch's
// running rows, locked shared in id order (held_many.sql), which of the
// batch's names their jobs recorded already (names_of.sql), then the records of leases
// that hold, each name once, in one multi-row INSERT
// (step_record_batch.sql). A name recorded in between by another
// transaction (error 1062, which undoes that statement only) sends the
// batch's new records one by one (recordStep), which tells which. Each
// record applies as it would alone: not recorded for a lease that does
// not hold, ErrStepRecorded for a name recorded already (or earlier in
// the batch). BENCHMARKS.md, "SQLite and MariaDB: a batch's step records
// in one statement".
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	out := make([]backend.StepRecordResult, len(p.Steps))
	if len(p.Steps) == 0 {
		return out, nil
	}
	ids := make([]int64, len(p.Steps))
	for i := range p.Steps {
		ids[i] = p.Steps[i].Lease.ID
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	q := &b.sql.steps
	type jobName struct {
		id   int64
		name string
	}
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		clear(out)
		live, err := heldLeases(ctx, tx, q.heldMany+" "+inList(ids)+" ORDER BY id LOCK IN SHARE MODE")
		if err != nil || len(live) == 0 {
			return err
		}
		heldIDs := make([]int64, 0, len(live))
		for l := range live {
			heldIDs = append(heldIDs, l.ID)
		}
		names, seen := []any{}, map[string]bool{}
		var marks strings.Builder
		for i := range p.Steps {
			if n := p.Steps[i].Name; live[p.Steps[i].Lease] && !seen[n] {
				seen[n] = true
				if len(names) > 0 {
					marks.WriteByte(',')
				}
				marks.WriteByte('?')
				names = append(names, n)
			}
		}
		slices.Sort(heldIDs)
		recorded := map[jobName]bool{}
		query := strings.NewReplacer("{{ids}}", inList(heldIDs), "{{names}}", "("+marks.String()+")").Replace(q.namesOf)
		rows, err := tx.QueryContext(ctx, query, names...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k jobName
			if err := rows.Scan(&k.id, &k.name); err != nil {
				rows.Close()
				return err
			}
			recorded[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var todo []int
		var records []backend.StepRecordParams
		for i := range p.Steps {
			s := &p.Steps[i]
			if !live[s.Lease] {
				continue
			}
			k := jobName{s.Lease.ID, s.Name}
			if recorded[k] {
				out[i].Err = backend.ErrStepRecorded
				continue
			}
			recorded[k] = true
			todo = append(todo, i)
			records = append(records, *s)
		}
		err = b.writeSteps(ctx, tx, q.stepRecordBatch, records)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			// Written in between, or a name the column's collation
			// equates with another: one by one, each told apart.
			for _, i := range todo {
				ok, err := b.recordStep(ctx, tx, &p.Steps[i])
				if err != nil && !errors.Is(err, backend.ErrStepRecorded) {
					return err
				}
				out[i] = backend.StepRecordResult{Recorded: ok, Err: err}
			}
			return nil
		}
		if err != nil {
			return err
		}
		for _, i := range todo {
			out[i].Recorded = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", err)
	}
	return out, nil
}

// heldLeases runs query (held_many.sql and its ids) and returns the
// leases of the running rows it reads.
func heldLeases(ctx context.Context, tx *sql.Tx, query string) (map[backend.LeaseRef]bool, error) {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	live := map[backend.LeaseRef]bool{}
	var l backend.LeaseRef
	for rows.Next() {
		if err := rows.Scan(&l.ID, &l.Fence); err != nil {
			return nil, err
		}
		live[l] = true
	}
	return live, rows.Err()
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
