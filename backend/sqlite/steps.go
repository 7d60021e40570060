package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqltext"
)

// Durable steps, waits and signals (backend.StepStore). Every write runs
// in the store's one write transaction at a time, so the check of an
// awaited signal and the park, or a signal and its wake-up, never
// interleave with each other.

//go:embed sql/steps/*.sql
var stepFiles embed.FS

// stepStatements are the statements of sql/steps/, one file each.
type stepStatements struct {
	stepRecord, stepRecordMany, held, signalSent, jobWait, signalInsert string
	signalWake, jobQueue, stepsOf, signalsOf, waitOf                    string
}

var stepStmt = func() stepStatements {
	var s stepStatements
	err := sqltext.Load(stepFiles, "sql/steps", strings.NewReplacer(), map[string]*string{
		"step_record": &s.stepRecord, "step_record_many": &s.stepRecordMany, "held": &s.held, "signal_sent": &s.signalSent, "job_wait": &s.jobWait,
		"signal_insert": &s.signalInsert, "signal_wake": &s.signalWake, "job_queue": &s.jobQueue,
		"steps_of": &s.stepsOf, "signals_of": &s.signalsOf, "wait_of": &s.waitOf,
	})
	if err != nil {
		panic(fmt.Sprintf("sqlite backend: %v", err))
	}
	return s
}()

// StepRecord implements backend.StepStore.
func (b *Backend) StepRecord(ctx context.Context, p *backend.StepRecordParams) (bool, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	var ok bool
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		var err error
		ok, err = recordStep(ctx, tx, p, time.Now())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	return ok, nil
}

// recordStep writes one step's record in tx.
func recordStep(ctx context.Context, tx *sql.Tx, p *backend.StepRecordParams, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, stepStmt.stepRecord, p.Lease.ID, p.Lease.Fence, p.Name, string(p.Result), now.UnixMicro())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		return n == 1, err
	}
	return false, notWritten(ctx, tx, p.Lease)
}

// notWritten tells why a record of lease was not written: its name was
// recorded already while the lease still holds its job (ErrStepRecorded),
// or the lease no longer holds it (nil).
func notWritten(ctx context.Context, tx *sql.Tx, lease backend.LeaseRef) error {
	var queue string
	switch err := tx.QueryRowContext(ctx, stepStmt.held, lease.ID, lease.Fence).Scan(&queue); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return backend.ErrStepRecorded
}

// StepRecordMany implements backend.StepStore: one write transaction, and
// one statement for the batch (step_record_many.sql); only a record it
// did not write is looked at again, to tell a lease that no longer holds
// from a name recorded already.
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	out := make([]backend.StepRecordResult, len(p.Steps))
	if len(p.Steps) == 0 {
		return out, nil
	}
	input, once, err := encodeStepRecords(p.Steps)
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", err)
	}
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		clear(out)
		if !once {
			now := time.Now()
			for i := range p.Steps {
				ok, err := recordStep(ctx, tx, &p.Steps[i], now)
				if err != nil && !errors.Is(err, backend.ErrStepRecorded) {
					return err
				}
				out[i] = backend.StepRecordResult{Recorded: ok, Err: err}
			}
			return nil
		}
		written, err := recordStepsOnce(ctx, tx, nil, input, time.Now(), true)
		if err != nil {
			return err
		}
		for i := range p.Steps {
			s := &p.Steps[i]
			k := stepKey{s.Lease, s.Name}
			if _, ok := written[k]; ok {
				delete(written, k) // the same name again in the batch was not written
				out[i].Recorded = true
				continue
			}
			switch err := notWritten(ctx, tx, s.Lease); {
			case errors.Is(err, backend.ErrStepRecorded):
				out[i].Err = err
			case err != nil:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", err)
	}
	return out, nil
}

// stepKey names a step record of one lease.
type stepKey struct {
	lease backend.LeaseRef
	name  string
}

// encodeStepRecords renders records as step_record_many.sql's JSON array
// of [id, fence, name, result], the result as a JSON string of its text,
// so the store keeps it byte for byte. A name or result that is not valid
// UTF-8 (which JSON would not carry unchanged) gives ok false: the caller
// writes the records one by one instead.
func encodeStepRecords(rs []backend.StepRecordParams) (input string, ok bool, err error) {
	for i := range rs {
		if !utf8.ValidString(rs[i].Name) || !utf8.Valid(rs[i].Result) {
			return "", false, nil
		}
	}
	buf := make([]byte, 0, len(rs)*48)
	buf = append(buf, '[')
	for i := range rs {
		r := &rs[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, r.Lease.ID, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(r.Lease.Fence), 10)
		buf = append(buf, ',')
		name, err := json.Marshal(r.Name)
		if err != nil {
			return "", false, fmt.Errorf("encode step %q: %w", r.Name, err)
		}
		buf = append(buf, name...)
		buf = append(buf, ',')
		result, err := json.Marshal(string(r.Result))
		if err != nil {
			return "", false, fmt.Errorf("encode step %q: %w", r.Name, err)
		}
		buf = append(buf, result...)
		buf = append(buf, ']')
	}
	buf = append(buf, ']')
	return string(buf), true, nil
}

// recordStepsOnce writes the records of input (encodeStepRecords) in tx
// with one statement, through many (step_record_many.sql prepared on the
// writer) when not nil. With names, it returns the records written.
func recordStepsOnce(ctx context.Context, tx *sql.Tx, many *sql.Stmt, input string, now time.Time, names bool) (map[stepKey]struct{}, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if many != nil {
		rows, err = tx.StmtContext(ctx, many).QueryContext(ctx, input, now.UnixMicro())
	} else {
		rows, err = tx.QueryContext(ctx, stepStmt.stepRecordMany, input, now.UnixMicro())
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var written map[stepKey]struct{}
	if names {
		written = map[stepKey]struct{}{}
	}
	var k stepKey
	for rows.Next() {
		if !names {
			continue
		}
		if err := rows.Scan(&k.lease.ID, &k.lease.Fence, &k.name); err != nil {
			return nil, err
		}
		written[k] = struct{}{}
	}
	return written, rows.Err()
}

// JobWait implements backend.StepStore.
func (b *Backend) JobWait(ctx context.Context, p *backend.JobWaitParams) (*backend.JobWaitResult, error) {
	res := &backend.JobWaitResult{}
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		*res = backend.JobWaitResult{}
		switch err := tx.QueryRowContext(ctx, stepStmt.held, p.Lease.ID, p.Lease.Fence).Scan(&res.Queue); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		if p.Signal != "" {
			if err := tx.QueryRowContext(ctx, stepStmt.signalSent, p.Lease.ID, p.Signal).Scan(&res.Signalled); err != nil {
				return err
			}
		}
		now := time.Now()
		state, runAt := backend.StateScheduled, now.Add(max(p.Delay, time.Microsecond))
		if res.Signalled {
			state, runAt = backend.StateAvailable, now
		}
		r, err := tx.ExecContext(ctx, stepStmt.jobWait, p.Lease.ID, p.Lease.Fence, string(state), runAt.UnixMicro(), nullIfEmpty(p.Signal))
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
	if res.Signalled {
		b.st.hub.Publish(backend.Wake{Queue: res.Queue})
	}
	return res, nil
}

// JobSignal implements backend.StepStore.
func (b *Backend) JobSignal(ctx context.Context, p *backend.JobSignalParams) (*backend.JobSignalResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	res := &backend.JobSignalResult{}
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		*res = backend.JobSignalResult{}
		switch err := tx.QueryRowContext(ctx, stepStmt.jobQueue, p.JobID).Scan(&res.Queue); {
		case errors.Is(err, sql.ErrNoRows):
			return backend.ErrNotFound
		case err != nil:
			return err
		}
		now := time.Now().UnixMicro()
		r, err := tx.ExecContext(ctx, stepStmt.signalInsert, p.JobID, p.Name, string(p.Payload), now)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		res.First = true
		switch err := tx.QueryRowContext(ctx, stepStmt.signalWake, p.JobID, p.Name, now).Scan(&res.Queue); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		res.Woke = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	if res.Woke && tx == nil {
		b.st.hub.Publish(backend.Wake{Queue: res.Queue})
	}
	return res, nil
}

// JobDurable implements backend.StepStore.
func (b *Backend) JobDurable(ctx context.Context, id int64) (*backend.JobDurable, error) {
	out := &backend.JobDurable{Steps: []backend.StepRow{}, Signals: []backend.SignalRow{}}
	err := func() error {
		rows, err := b.st.readers.QueryContext(ctx, stepStmt.stepsOf, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r := backend.StepRow{JobID: id}
			var result string
			var at int64
			if err := rows.Scan(&r.Name, &result, &r.Fence, &at); err != nil {
				return err
			}
			r.Result, r.At = []byte(result), time.UnixMicro(at).UTC()
			out.Steps = append(out.Steps, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		sigs, err := b.st.readers.QueryContext(ctx, stepStmt.signalsOf, id)
		if err != nil {
			return err
		}
		defer sigs.Close()
		for sigs.Next() {
			r := backend.SignalRow{JobID: id}
			var payload string
			var at int64
			if err := sigs.Scan(&r.Name, &payload, &at); err != nil {
				return err
			}
			r.Payload, r.At = []byte(payload), time.UnixMicro(at).UTC()
			out.Signals = append(out.Signals, r)
		}
		if err := sigs.Err(); err != nil {
			return err
		}
		err = b.st.readers.QueryRowContext(ctx, stepStmt.waitOf, id).Scan(&out.WaitSignal)
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

// nullIfEmpty is s, or SQL NULL for "".
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
