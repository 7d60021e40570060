package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobFinishMany implements backend.Backend. In one transaction (the
// caller's, or a short one of its own) it locks the batch's rows by primary
// key and reads their leases, then writes only the outcomes whose lease
// holds: completions with one UPDATE (or DELETE) by id list, every other
// outcome with one UPDATE whose per-job values are CASE expressions over the
// ids (see finishOtherSet). Knowing
// the live leases before writing is what makes the rejected list exact,
// without RETURNING (MySQL has none for UPDATE).
//
// A deadlock or lock wait timeout rolls the whole transaction back, so the
// retry starts from nothing written: it cannot complete a job twice, and
// because no write happened the job's lease still holds for the retry.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(p.Finishes) == 0 {
		return &backend.JobFinishManyResult{}, nil
	}
	defer b.metrics.finishes.since(time.Now())
	fs := slices.Clone(p.Finishes)
	slices.SortFunc(fs, func(a, b backend.JobFinish) int { return cmpID(a.Lease.ID, b.Lease.ID) })
	if callerTx == nil {
		done, err := b.completeFast(ctx, fs, p.DeleteCompleted)
		if err != nil {
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
		if done == nil {
			return &backend.JobFinishManyResult{}, nil
		}
		// What the fast path applied is not named again: the long way
		// would find those rows finished and call their leases lost.
		fs = slices.DeleteFunc(fs, func(f backend.JobFinish) bool { return done[f.Lease.ID] })
		if len(fs) == 0 {
			return &backend.JobFinishManyResult{}, nil
		}
	}
	var rejected []backend.LeaseRef
	ctx, rq := withReleased(ctx)
	run := func(db DBTX) error {
		var ferr error
		clear(rq.queues)
		rejected, ferr = b.finish(ctx, db, fs, p.DeleteCompleted)
		return ferr
	}
	err = b.writeIn(ctx, callerTx, run)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if callerTx == nil {
		b.announce(rq) // in a caller's transaction, the poll finds them
	}
	return &backend.JobFinishManyResult{Rejected: rejected}, nil
}

// errLeaseMissed rolls back completeFast's transaction when a lease did not
// hold.
var errLeaseMissed = errors.New("a lease did not hold")

// completeFast writes a batch of plain completions (fs sorted by id) with
// one UPDATE (or DELETE) whose condition holds the leases (leaseGuard):
// when every lease holds, that is the whole finish, without the locking
// read of finish. It returns nil when it finished the batch, else the ids
// it completed (none, or some), for the caller to finish the rest the long
// way, which names the rejected leases. A batch with any other outcome, or
// with two leases of one job, is left to the long way at once.
//
// Kept completions that carry no step records are one autocommit
// statement: a job it completed then reads as completed under the fence of
// its lease, which only this lease's outcome writes (a rescue, a retry or
// a new claim moves the fence), so after a short count one read names
// them. At a pickup's rate each claim's jobs finish in a batch of their
// own, and a transaction's BEGIN and COMMIT were two round trips each
// (docs/mysql.md, "Finishing jobs"). A deleting completion, or one with
// records to write, stays in a transaction that rolls back when a lease
// does not hold: a deleted row says nothing of who deleted it, and the
// records must not be written for a lease that did not hold.
func (b *Backend) completeFast(ctx context.Context, fs []backend.JobFinish, deleteCompleted bool) (map[int64]bool, error) {
	none := map[int64]bool{}
	ids := make([]int64, len(fs))
	fences := make([]int32, len(fs))
	for i, f := range fs {
		if f.Outcome != backend.OutcomeComplete || f.Error != nil || (i > 0 && f.Lease.ID == fs[i-1].Lease.ID) {
			return none, nil
		}
		ids[i], fences[i] = f.Lease.ID, f.Lease.Fence
	}
	q := b.sql.complete
	if deleteCompleted {
		q = b.sql.deleteDone
	}
	// A job with dependents is left to the long way, which settles them
	// in the same transaction (workflow.go): matching fewer rows sends the
	// batch there.
	guard := leaseGuard(ids, fences)
	q += inList(ids) + " AND NOT has_dependents" + guard
	// Every lease holds when the statement matches every row: the
	// records the completions carry are written after it, in the same
	// transaction (none for a job it deletes).
	var steps []backend.StepRecordParams
	if !deleteCompleted {
		steps = backend.CarriedSteps(fs, nil)
	}
	if !deleteCompleted && len(steps) == 0 {
		var n int64
		err := b.retry(ctx, func() error {
			res, err := b.db.ExecContext(ctx, q)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return nil, connWriteError(err, true)
		}
		if int(n) == len(ids) {
			return nil, nil
		}
		// Some completions may have committed: a failure to read which
		// leaves the batch's outcome unknown to the caller.
		done, err := b.completedUnder(ctx, ids, guard)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", backend.ErrOutcomeUnknown, err)
		}
		return done, nil
	}
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
			return errors.Join(errLeaseMissed, err)
		}
		return b.writeSteps(ctx, tx, b.sql.steps.stepRecordRows, steps)
	})
	if errors.Is(err, errLeaseMissed) {
		return none, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// completedUnder returns those of ids whose rows are completed under the
// fences guard names (leaseGuard): the completions of those leases.
func (b *Backend) completedUnder(ctx context.Context, ids []int64, guard string) (map[int64]bool, error) {
	rows, err := b.db.QueryContext(ctx, b.sql.completedUnder+inList(ids)+guard)
	if err != nil {
		return nil, fmt.Errorf("read the completions applied: %w", err)
	}
	defer rows.Close()
	done := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read the completions applied: %w", err)
		}
		done[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the completions applied: %w", err)
	}
	return done, nil
}

func cmpID(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// finish writes the outcomes of fs (sorted by id) inside a transaction and
// returns the leases that did not hold.
func (b *Backend) finish(ctx context.Context, db DBTX, fs []backend.JobFinish, deleteCompleted bool) ([]backend.LeaseRef, error) {
	ids := make([]int64, 0, len(fs))
	for i, f := range fs {
		if i == 0 || f.Lease.ID != fs[i-1].Lease.ID {
			ids = append(ids, f.Lease.ID)
		}
	}
	live, deps, err := b.liveLeases(ctx, db, b.sql.lockForFinish+inList(ids)+" FOR UPDATE", ids)
	if err != nil {
		return nil, err
	}
	var (
		rejected  []backend.LeaseRef
		completed []int64
		kept      []int64
		other     []backend.JobFinish
	)
	var withSteps map[backend.LeaseRef]bool // applied leases that keep their job, when records ride along
	if backend.CarriesSteps(fs) {
		withSteps = map[backend.LeaseRef]bool{}
	}
	for _, f := range fs {
		if !live[f.Lease] {
			rejected = append(rejected, f.Lease)
			continue
		}
		delete(live, f.Lease) // a lease named twice applies once
		keeps := true
		if f.Outcome == backend.OutcomeComplete && f.Error == nil {
			if deleteCompleted && deps[f.Lease.ID] {
				kept = append(kept, f.Lease.ID) // its dependents read it
			} else {
				completed = append(completed, f.Lease.ID)
				keeps = !deleteCompleted
			}
		} else {
			other = append(other, f)
		}
		if withSteps != nil && keeps {
			withSteps[f.Lease] = true
		}
	}
	if len(completed) > 0 {
		q := b.sql.complete
		if deleteCompleted {
			q = b.sql.deleteDone
		}
		if err := execCount(ctx, db, q+inList(completed), len(completed)); err != nil {
			return nil, err
		}
	}
	if len(kept) > 0 {
		if err := execCount(ctx, db, b.sql.complete+inList(kept), len(kept)); err != nil {
			return nil, err
		}
	}
	if len(other) > 0 {
		for chunk := range slices.Chunk(other, finishOtherChunk) {
			chunkIDs := make([]int64, len(chunk))
			for i, f := range chunk {
				chunkIDs[i] = f.Lease.ID
			}
			set, args := finishOtherSet(chunk)
			if err := execCount(ctx, db, strings.Replace(b.sql.finishOther, "{{set}}", set, 1)+inList(chunkIDs), len(chunk), args...); err != nil {
				return nil, err
			}
		}
	}
	if withSteps != nil {
		// The step records the applied outcomes carry, their rows locked
		// and their leases checked above.
		if err := b.writeSteps(ctx, db, b.sql.steps.stepRecordRows, backend.CarriedSteps(fs, func(f *backend.JobFinish) bool { return withSteps[f.Lease] })); err != nil {
			return nil, err
		}
	}
	if len(deps) > 0 {
		// Jobs with dependents settle them in this transaction.
		settle := make([]int64, 0, len(deps))
		for id := range deps {
			settle = append(settle, id)
		}
		if err := b.settle(ctx, db, settle); err != nil {
			return nil, err
		}
	}
	return rejected, nil
}

// WritesOutcomeSteps implements backend.OutcomeStepWriter: JobFinishMany
// writes the step records its outcomes carry in the outcomes' own
// transaction, after them, with one multi-row INSERT per chunk
// (step_record_rows.sql): only the records of leases whose outcome it
// applied (every lease of completeFast's batch, which rolls back when one
// does not hold; those finish found live under its row locks), none of a
// job the outcome deletes; a name recorded already is left as it is.
// BENCHMARKS.md, "SQLite and MariaDB: a batch's step records in one
// statement".
func (b *Backend) WritesOutcomeSteps() bool { return true }

// stepRowsChunk bounds the records of one step_record_rows.sql INSERT
// (two bound values each).
const stepRowsChunk = 500

// writeSteps writes records (of leases this transaction holds) in db's
// transaction with query (step_record_rows.sql or step_record_batch.sql),
// one multi-row INSERT per stepRowsChunk records.
func (b *Backend) writeSteps(ctx context.Context, db DBTX, query string, records []backend.StepRecordParams) error {
	for chunk := range slices.Chunk(records, stepRowsChunk) {
		var rows strings.Builder
		args := make([]any, 0, 2*len(chunk))
		for i, r := range chunk {
			if i > 0 {
				rows.WriteByte(',')
			}
			rows.WriteByte('(')
			rows.WriteString(strconv.FormatInt(r.Lease.ID, 10))
			rows.WriteString(", ?, ?, ")
			rows.WriteString(strconv.FormatInt(int64(r.Lease.Fence), 10))
			rows.WriteString(", UTC_TIMESTAMP(6))")
			args = append(args, r.Name, string(r.Result))
		}
		if _, err := db.ExecContext(ctx, strings.Replace(query, "{{rows}}", rows.String(), 1), args...); err != nil {
			return err
		}
	}
	return nil
}

// liveLeases runs query (which selects id, fence, state, has_dependents
// for ids) and returns the leases of running rows, and those of them that
// have dependents (nil for none).
func (b *Backend) liveLeases(ctx context.Context, db DBTX, query string, ids []int64) (map[backend.LeaseRef]bool, map[int64]bool, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	live := make(map[backend.LeaseRef]bool, len(ids))
	var deps map[int64]bool
	for rows.Next() {
		var (
			l     backend.LeaseRef
			state string
			hd    bool
		)
		if err := rows.Scan(&l.ID, &l.Fence, &state, &hd); err != nil {
			return nil, nil, err
		}
		if backend.State(state) == backend.StateRunning {
			live[l] = true
			if hd {
				if deps == nil {
					deps = map[int64]bool{}
				}
				deps[l.ID] = true
			}
		}
	}
	return live, deps, rows.Err()
}

// execCount runs a write that must affect exactly want rows (all of them are
// locked by this transaction and known to be running).
func execCount(ctx context.Context, db DBTX, query string, want int, args ...any) error {
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || int(n) != want {
		return fmt.Errorf("wrote %d of %d locked rows (%v)", n, want, err)
	}
	return nil
}

// finishOtherChunk bounds the jobs of one finishOther UPDATE. The server
// reads a CASE's arms in order for every row, so a statement's cost grows
// with the square of its distinct arms; chunks keep that square small
// (BenchmarkFinish; BENCHMARKS.md, "MySQL/MariaDB: non-completion outcomes
// without a multiple-table UPDATE").
const finishOtherChunk = 100

// finishOtherSet renders the SET list of the finishOther UPDATE for fs (each
// a distinct running job this transaction has locked). Each column is a CASE
// over the ids; a column's expression for one job follows from its outcome,
// so jobs with the same expression share one "WHEN id IN (…)" arm. Numbers
// are formatted here; error texts are bound, once per distinct error, in the
// order they appear.
//
// Only attempt is both read and written, and it is assigned last, so the
// statement means the same whether the server applies assignments left to
// right or simultaneously.
func finishOtherSet(fs []backend.JobFinish) (string, []any) {
	const (
		now            = "UTC_TIMESTAMP(6)"
		retryExhausted = "attempt >= max_attempts"
	)
	type errorEntry struct {
		attempt      int
		error, trace string
	}
	var (
		errs                                  = map[errorEntry][]int64{}
		errOrder                              []errorEntry
		finalized, state, runAt, attemptGiven caseByID
	)
	for _, f := range fs {
		id := f.Lease.ID
		if e := f.Error; e != nil {
			k := errorEntry{e.Attempt, e.Error, e.Trace}
			if _, ok := errs[k]; !ok {
				errOrder = append(errOrder, k)
			}
			errs[k] = append(errs[k], id)
		}
		switch f.Outcome {
		case backend.OutcomeComplete:
			state.add("'completed'", id)
			finalized.add(now, id)
		case backend.OutcomeRetry:
			state.add("IF("+retryExhausted+", 'discarded', 'retryable')", id)
			finalized.add("IF("+retryExhausted+", "+now+", NULL)", id)
			runAt.add(now+" + INTERVAL "+strconv.FormatInt(micros(f.Delay), 10)+" MICROSECOND", id)
		case backend.OutcomeSnooze:
			if f.Delay > 0 {
				state.add("'scheduled'", id)
			} else {
				state.add("'available'", id)
			}
			runAt.add(now+" + INTERVAL "+strconv.FormatInt(micros(f.Delay), 10)+" MICROSECOND", id)
			attemptGiven.add("attempt - 1", id)
		case backend.OutcomeCancel:
			state.add("'cancelled'", id)
			finalized.add(now, id)
		case backend.OutcomeDiscard:
			state.add("'discarded'", id)
			finalized.add(now, id)
		default: // OutcomeRelease
			state.add("'available'", id)
			attemptGiven.add("attempt - 1", id)
		}
	}
	var (
		set  strings.Builder
		args []any
	)
	if len(errOrder) > 0 {
		// Jobs that failed alike (same attempt, error and trace: a batch
		// that hit the same outage) share one arm and one copy of the text.
		set.WriteString("errors = CASE")
		for _, k := range errOrder {
			set.WriteString(" WHEN id IN " + inList(errs[k]) + " THEN JSON_ARRAY_APPEND(COALESCE(errors, JSON_ARRAY()), '$', JSON_OBJECT('attempt', " +
				strconv.Itoa(k.attempt) + ", 'at', " + nowJSON + ", 'error', ?")
			args = append(args, k.error)
			if k.trace != "" {
				set.WriteString(", 'trace', ?")
				args = append(args, k.trace)
			}
			set.WriteString("))")
		}
		set.WriteString(" ELSE errors END,\n  ")
	}
	set.WriteString("finalized_at = " + finalized.sql(neverTime) + ",\n  ")
	set.WriteString("state = " + state.sql("state") + ",\n  ")
	set.WriteString("run_at = " + runAt.sql("run_at") + ",\n  ")
	set.WriteString("attempt = " + attemptGiven.sql("attempt"))
	return set.String(), args
}

// caseByID builds "CASE WHEN id IN (…) THEN expr … ELSE fallback END",
// grouping the ids that share an expression, in first-seen order.
type caseByID struct {
	exprs []string
	ids   map[string][]int64
}

func (c *caseByID) add(expr string, id int64) {
	if c.ids == nil {
		c.ids = map[string][]int64{}
	}
	if _, ok := c.ids[expr]; !ok {
		c.exprs = append(c.exprs, expr)
	}
	c.ids[expr] = append(c.ids[expr], id)
}

func (c *caseByID) sql(fallback string) string {
	if len(c.exprs) == 0 {
		return fallback
	}
	var b strings.Builder
	b.WriteString("CASE")
	for _, e := range c.exprs {
		b.WriteString(" WHEN id IN " + inList(c.ids[e]) + " THEN " + e)
	}
	b.WriteString(" ELSE " + fallback + " END")
	return b.String()
}
