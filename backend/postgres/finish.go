package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/backend"
)

// JobFinishMany implements backend.Backend. The plain statements leave
// jobs with dependents alone; the finishes they rejected go to
// finishDependents, which writes those jobs' outcomes and settles their
// dependents in one transaction (workflow.go).
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	// Jobs this backend claimed knowing they have dependents go straight
	// to finishDependents; the plain statements would only reject them.
	plain, known := p, []backend.LeaseRef(nil)
	if b.dependents.empty() {
		// No job with dependents is running here: the plain path alone.
	} else if ids, fences := leaseLists(p.Finishes); len(ids) > 0 {
		if with, _ := b.dependents.split(ids, fences); len(with) > 0 {
			rest := make([]backend.JobFinish, 0, len(p.Finishes)-len(with))
			skip := make(map[int]bool, len(with))
			for _, i := range with {
				skip[i] = true
				known = append(known, p.Finishes[i].Lease)
			}
			for i, f := range p.Finishes {
				if !skip[i] {
					rest = append(rest, f)
				}
			}
			q := *p
			q.Finishes = rest
			plain = &q
		}
	}
	res, err := b.finishMany(ctx, plain)
	if err != nil {
		return nil, err
	}
	res.Rejected = append(res.Rejected, known...)
	if len(res.Rejected) == 0 {
		return res, b.recordsGone(ctx, p, res)
	}
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	// finishDependents keeps every job it finishes: the step records its
	// outcomes carry go first (a finish the plain statements refused
	// wrote none of them).
	if err := b.recordFirst(ctx, p.Finishes, func(f *backend.JobFinish) bool { return slices.Contains(res.Rejected, f.Lease) }); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if res.Rejected, err = b.finishDependents(ctx, db, p.Finishes, res.Rejected); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", ownWriteError(p.Tx == nil, err))
	}
	if len(known) > 0 {
		ids, fences := leaseLists(p.Finishes)
		b.dependents.forget(ids, fences)
	}
	return res, b.recordsGone(ctx, p, res)
}

// recordsGone deletes the durable records of the jobs p deleted at their
// completion (records_gone.sql), in p's transaction when it has one (a
// failure then fails the call, whose transaction is aborted). Without one
// the outcomes are written by then, so a failure does not fail the call:
// the ids are kept and tried again with the next completions' (at most
// maxGoneRecords; past that the oldest are left behind).
func (b *Backend) recordsGone(ctx context.Context, p *backend.JobFinishManyParams, res *backend.JobFinishManyResult) error {
	if !p.DeleteCompleted {
		return nil
	}
	var ids []int64
	for _, f := range p.Finishes {
		if f.Durable && f.Outcome == backend.OutcomeComplete && !slices.Contains(res.Rejected, f.Lease) {
			ids = append(ids, f.Lease.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return fmt.Errorf("delete the records of completed jobs: %w", err)
	}
	if p.Tx != nil {
		if _, err := db.Exec(ctx, b.sql.steps.recordsGone, ids); err != nil {
			return fmt.Errorf("delete the records of completed jobs: %w", err)
		}
		return nil
	}
	b.goneMu.Lock()
	ids = append(b.goneRecords, ids...)
	b.goneRecords = nil
	b.goneMu.Unlock()
	if _, err := db.Exec(ctx, b.sql.steps.recordsGone, ids); err != nil {
		b.goneMu.Lock()
		b.goneRecords = append(b.goneRecords, ids[max(0, len(ids)-maxGoneRecords):]...)
		b.goneMu.Unlock()
	}
	return nil
}

// WritesOutcomeSteps implements backend.OutcomeStepWriter: a batch of
// completions kept writes the step records it carries in the statement
// that completes its jobs in lease rows (complete_leased_keep_steps.sql),
// fenced by the completion and committed with it; every other outcome
// has them written first, by StepRecordMany's statement in a transaction
// of its own (recordFirst), as the runtime wrote them before handing the
// outcome in.
func (b *Backend) WritesOutcomeSteps() bool { return true }

// SettleWriters implements backend.SettleWriters: two writers for the
// outcomes of jobs with dependents. Their transactions lock as those of
// two processes do, each kind of row in id order (lease rows, the jobs
// finished in place, the dependents settled, the batches counted), so
// they wait for each other instead of deadlocking; a large release on one
// (finishDependentsParts: transactions of about settlePartRows rows) leaves
// the other writing the outcomes of the tasks its first parts released.
func (b *Backend) SettleWriters() int { return 2 }

// recordFirst writes the step records the finishes of fs that want
// accepts carry (all when want is nil) through StepRecordMany, before
// their outcomes are written. A record refused or left as it was (its
// lease lost, its name recorded already) changes nothing of the outcome,
// as when the runtime wrote it: the outcome is then refused too, or the
// recorded result stands.
func (b *Backend) recordFirst(ctx context.Context, fs []backend.JobFinish, want func(*backend.JobFinish) bool) error {
	steps := backend.CarriedSteps(fs, want)
	if len(steps) == 0 {
		return nil
	}
	_, err := b.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: steps})
	return err
}

// maxGoneRecords bounds the ids recordsGone keeps to try again.
const maxGoneRecords = 10000

// leaseLists returns the finishes' ids and fences (nil when there is none).
func leaseLists(fs []backend.JobFinish) ([]int64, []int32) {
	if len(fs) == 0 {
		return nil, nil
	}
	ids, fences := make([]int64, len(fs)), make([]int32, len(fs))
	for i, f := range fs {
		ids[i], fences[i] = f.Lease.ID, f.Lease.Fence
	}
	return ids, fences
}

// finishMany writes outcomes through the plain statements.
func (b *Backend) finishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(p.Finishes) == 0 {
		return &backend.JobFinishManyResult{}, nil
	}
	if allCompleted(p.Finishes) {
		return b.completeMany(ctx, db, p.Finishes, p.DeleteCompleted)
	}
	// A completion deleted needs no records: they would go with its job.
	if err := b.recordFirst(ctx, p.Finishes, func(f *backend.JobFinish) bool {
		return !p.DeleteCompleted || f.Outcome != backend.OutcomeComplete
	}); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	// Lock rows in id order, as heartbeats do, so two batches never deadlock.
	fs := slices.Clone(p.Finishes)
	slices.SortFunc(fs, func(a, b backend.JobFinish) int { return cmp.Compare(a.Lease.ID, b.Lease.ID) })
	n := len(fs)
	var (
		ids      = make([]int64, n)
		fences   = make([]int32, n)
		outcomes = make([]int16, n)
		delays   = make([]int64, n)
		errs     = make([]json.RawMessage, n)
	)
	for i, f := range fs {
		ids[i], fences[i], outcomes[i], delays[i] = f.Lease.ID, f.Lease.Fence, int16(f.Outcome), micros(f.Delay)
		if f.Error != nil {
			e, err := json.Marshal(struct {
				Attempt int    `json:"attempt"`
				Error   string `json:"error"`
				Trace   string `json:"trace,omitempty"`
			}{f.Error.Attempt, f.Error.Error, f.Error.Trace})
			if err != nil {
				return nil, fmt.Errorf("finish jobs: encode error: %w", err)
			}
			errs[i] = e
		}
	}
	// What no lease row held is finished in place; the in-place statement
	// runs after the leased one, so it sees every job that one found moved
	// back into spool_jobs (spool_unlease) meanwhile.
	done, err := b.routed(ids, fences, func(idx []int) ([]backend.LeaseRef, error) {
		return b.finishRows(ctx, db, b.sql.finishLeased, pick(ids, idx), pick(fences, idx), pick(outcomes, idx), pick(delays, idx), pick(errs, idx), p.DeleteCompleted)
	}, func(idx []int) ([]backend.LeaseRef, error) {
		return b.finishRows(ctx, db, b.sql.finish, pick(ids, idx), pick(fences, idx), pick(outcomes, idx), pick(delays, idx), pick(errs, idx), p.DeleteCompleted)
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", ownWriteError(p.Tx == nil, err))
	}
	b.placed.forget(ids, fences)
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(fs, done, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}

// finishRows runs a finish statement (finish.sql or finish_leased.sql)
// and returns the leases it applied, lowering claim floors for the jobs
// that are pending again and announcing those it made due at once.
func (b *Backend) finishRows(ctx context.Context, db DBTX, query string, ids []int64, fences []int32, outcomes []int16,
	delays []int64, errs []json.RawMessage, deleteCompleted bool) ([]backend.LeaseRef, error) {
	// Jobs made due at once (a release, a snooze without delay) are
	// announced as an insert's are. On the pool with a waker, the waker
	// sends them after the statement's commit, whichever statement wrote
	// them, and the insert trigger is told to return at once
	// (quietSettings), as it is for a finish with nothing to announce.
	// Elsewhere (a caller's transaction, a backend without a waker) they
	// are announced in the statement's transaction, so at its commit: the
	// insert trigger announces the rows the leased statement writes back
	// into spool_jobs, and a notification sent after the in-place
	// statement (notifyDue) the rows it updates, which no trigger sees.
	due := dueAtOnce(ids, outcomes, delays)
	byWaker := len(due) > 0 && db == DBTX(b.pool) && b.waker != nil
	quiet := len(due) == 0 || byWaker
	var (
		wake queueKeys
		done = make([]backend.LeaseRef, 0, len(ids))
		// One set of destinations for every row: closures or locals taken
		// by address per row cost three allocations a job.
		l     backend.LeaseRef
		queue pgtype.Text
		key   claimKey
		dest  = []any{&l.ID, &l.Fence, &queue, &key.priority, &key.runAt}
	)
	err := b.queryBatch(ctx, db, query, quiet, len(ids), func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			done = append(done, l)
			if !queue.Valid {
				continue
			}
			key.id = l.ID
			b.floors.lower(queue.String, key)
			if due[l.ID] {
				wake.note(queue.String, key)
			}
		}
		return rows.Err()
	}, ids, fences, outcomes, delays, errs, deleteCompleted)
	switch {
	case err != nil || len(wake) == 0:
	case byWaker || (db == DBTX(b.pool) && query != b.sql.finishLeased):
		b.announceDue(ctx, wake)
	case query != b.sql.finishLeased: // in a caller's transaction
		err = b.notifyDue(ctx, db, wake)
	}
	return done, err
}

// announceDue announces jobs a statement on the pool made due by an
// update, which no trigger sees: through the waker if there is one, else
// at once. A wake-up that fails is lost, not the statement's work: the
// jobs are committed, and workers find them by their poll.
func (b *Backend) announceDue(ctx context.Context, keys queueKeys) {
	if len(keys) == 0 {
		return
	}
	if b.waker != nil {
		b.waker.add(keys)
		return
	}
	_ = b.notifyDue(ctx, b.pool, keys)
}

// notifySQL sends one notification on channel $1 per payload of $2.
const notifySQL = `SELECT pg_notify($1, x) FROM unnest($2::text[]) x`

// duePayloads are the notifications announcing each queue's lowest claim
// key, in the insert trigger's format, followed by the ids of the jobs
// announced when they are listed (parseInsertNotice).
func duePayloads(keys queueKeys) []string {
	payloads := make([]string, 0, len(keys))
	for q, w := range keys {
		p := q + " " + strconv.Itoa(int(w.key.priority)) + " " + strconv.FormatInt(w.key.runAt.UnixMicro(), 10)
		if len(w.ids) > 0 {
			var b strings.Builder
			b.WriteString(p)
			for i, id := range w.ids {
				if i == 0 {
					b.WriteByte(' ')
				} else {
					b.WriteByte(',')
				}
				b.WriteString(strconv.FormatInt(id, 10))
			}
			p = b.String()
		}
		payloads = append(payloads, p)
	}
	return payloads
}

// notifyDue announces jobs made due by an update in db's transaction, so
// at its commit in a caller's transaction, at once on the pool.
func (b *Backend) notifyDue(ctx context.Context, db DBTX, keys queueKeys) error {
	if _, err := db.Exec(ctx, notifySQL, b.channel, duePayloads(keys)); err != nil {
		return fmt.Errorf("announce released jobs: %w", err)
	}
	return nil
}

// routed runs a finish's or heartbeat's two statements over a batch sorted
// by id, each given indexes into ids and fences (in id order): the jobs
// this backend claimed in place go to inPlace; the others, and any of
// those inPlace did not apply, to leased; and what leased did not apply to
// inPlace. It returns the leases applied. Each statement commits on its
// own: an error after the first statement succeeded matches
// errPartlyApplied.
func (b *Backend) routed(ids []int64, fences []int32, leased, inPlace func(idx []int) ([]backend.LeaseRef, error)) ([]backend.LeaseRef, error) {
	placed, rest := b.placed.split(ids, fences)
	var done []backend.LeaseRef
	if len(placed) > 0 {
		d, err := inPlace(placed)
		if err != nil {
			return nil, err
		}
		done = d
		if missed := notDone(d, ids, fences, placed); len(missed) > 0 {
			rest = append(rest, missed...)
			slices.Sort(rest)
		}
	}
	if len(rest) == 0 {
		return done, nil
	}
	d, err := leased(rest)
	if err != nil {
		if len(placed) > 0 {
			err = fmt.Errorf("%w: %w", errPartlyApplied, err)
		}
		return nil, err
	}
	done = append(done, d...)
	if left := notDone(d, ids, fences, rest); len(left) > 0 {
		d, err := inPlace(left)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errPartlyApplied, err)
		}
		done = append(done, d...)
	}
	return done, nil
}

// notDone returns those of the indexes idx whose (ids[i], fences[i]) are
// not among done. A statement returns one row per entry of idx that it
// applied and none for any other (a repeated pair is matched, or updated,
// once per entry at most), so as many rows as entries means all applied:
// the common case, where building the set of done pairs was 3% of a
// drain's client CPU.
func notDone(done []backend.LeaseRef, ids []int64, fences []int32, idx []int) []int {
	if len(done) >= len(idx) {
		return nil
	}
	applied := make(map[backend.LeaseRef]bool, len(done))
	for _, l := range done {
		applied[l] = true
	}
	var rest []int
	for _, i := range idx {
		if !applied[backend.LeaseRef{ID: ids[i], Fence: fences[i]}] {
			rest = append(rest, i)
		}
	}
	return rest
}

// appliedExcept returns the (id, fence) pairs at the indexes idx, but for
// one entry per pair in missed: what a statement that returns the entries
// it did not apply applied.
func appliedExcept(ids []int64, fences []int32, idx []int, missed []backend.LeaseRef) []backend.LeaseRef {
	var skip map[backend.LeaseRef]int
	if len(missed) > 0 {
		skip = make(map[backend.LeaseRef]int, len(missed))
		for _, l := range missed {
			skip[l]++
		}
	}
	done := make([]backend.LeaseRef, 0, len(idx)-min(len(missed), len(idx)))
	for _, i := range idx {
		l := backend.LeaseRef{ID: ids[i], Fence: fences[i]}
		if n := skip[l]; n > 0 {
			skip[l] = n - 1
			continue
		}
		done = append(done, l)
	}
	return done
}

// pick returns the elements of s at idx.
func pick[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = s[i]
	}
	return out
}

// completeMany writes a batch of successes: the jobs held in lease rows
// through complete_leased_keep.sql or complete_leased_delete.sql, the rest
// with the lighter in-place completeKeep or completeDelete statement, each
// in id order, as JobFinishMany locks rows.
//
// It sorts the leases alone: sorting the finishes (40 bytes each, where a
// lease is 16) took 250 µs a batch of 2,000 against 70 µs, 5% of the
// client's CPU in a drain (--cpuprofile: pdqsortCmpFunc).
func (b *Backend) completeMany(ctx context.Context, db DBTX, fs []backend.JobFinish, deleteCompleted bool) (*backend.JobFinishManyResult, error) {
	n := len(fs)
	leases := make([]backend.LeaseRef, n)
	for i, f := range fs {
		leases[i] = f.Lease
	}
	slices.SortFunc(leases, func(a, b backend.LeaseRef) int { return cmp.Compare(a.ID, b.ID) })
	ids, fences := make([]int64, n), make([]int32, n)
	for i, l := range leases {
		ids[i], fences[i] = l.ID, l.Fence
	}
	query := b.sql.completeKeep
	if deleteCompleted {
		query = b.sql.completeDelete
	}
	// The step records the completions carry, by lease, when they are
	// kept (a deleted job's records would go with it).
	var steps map[backend.LeaseRef][]backend.StepRecordParams
	if !deleteCompleted && backend.CarriesSteps(fs) {
		steps = make(map[backend.LeaseRef][]backend.StepRecordParams)
		for _, f := range fs {
			if len(f.Steps) > 0 {
				steps[f.Lease] = append(steps[f.Lease], f.Steps...)
			}
		}
	}
	done, err := b.routed(ids, fences, func(idx []int) (done []backend.LeaseRef, err error) {
		// A completion makes no job pending: nothing to announce and no
		// floor to lower. A kept one goes back into spool_jobs, whose
		// insert trigger has nothing to check in it (quiet); a deleted
		// one writes nothing there.
		if deleteCompleted {
			// complete_leased_delete.sql returns the entries it did not
			// apply instead.
			var missed []backend.LeaseRef
			err = b.queryBatch(ctx, db, b.sql.completeLeasedDelete, false, len(idx), func(rows pgx.Rows) (err error) {
				missed, err = collectLeases(rows)
				return err
			}, pick(ids, idx), pick(fences, idx))
			if err != nil {
				return nil, err
			}
			return appliedExcept(ids, fences, idx, missed), nil
		}
		read := func(rows pgx.Rows) (err error) {
			done, err = collectLeases(rows)
			return err
		}
		if sets := stepSetsOf(steps, ids, fences, idx); len(sets.ids) > 0 {
			err = b.queryBatch(ctx, db, b.sql.completeLeasedKeepSteps, true, len(idx), read,
				pick(ids, idx), pick(fences, idx), sets.ids, sets.first, sets.names, sets.result, sets.parts)
			return done, err
		}
		err = b.queryBatch(ctx, db, b.sql.completeLeasedKeep, true, len(idx), read, pick(ids, idx), pick(fences, idx))
		return done, err
	}, func(idx []int) (rest []backend.LeaseRef, err error) {
		// Completed in place: the records go first, in a transaction of
		// their own.
		var recs []backend.StepRecordParams
		for _, i := range idx {
			recs = append(recs, steps[backend.LeaseRef{ID: ids[i], Fence: fences[i]}]...)
		}
		if len(recs) > 0 {
			if _, err := b.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: recs}); err != nil {
				return nil, err
			}
		}
		query := query
		if len(idx) <= genericPlanMax && distinctIDs(ids, idx) {
			query = b.sql.completeKeepSmall
			if deleteCompleted {
				query = b.sql.completeDeleteSmall
			}
		}
		err = b.queryBatch(ctx, db, query, false, len(idx), func(rows pgx.Rows) (err error) {
			rest, err = collectLeases(rows)
			return err
		}, pick(ids, idx), pick(fences, idx))
		return rest, err
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", ownWriteError(db == DBTX(b.pool), err))
	}
	b.placed.forget(ids, fences)
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(fs, done, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}

// stepSets are the step records of a batch's jobs as sets, the rows of
// spool_step_sets: a job's records in the order recorded, a new set past
// each 64 KiB of results (as steps/step_record_many.sql groups them), one
// element per set: the job, its first name, its names as an array
// literal, its results as a JSON array, its part.
type stepSets struct {
	ids           []int64
	first         []string
	names, result []string
	parts         []int32
}

// stepSetBytes is the results a set holds before the next set starts.
const stepSetBytes = 65536

// stepSetsOf returns the sets of the records in steps of the jobs at idx
// (none when steps is nil).
func stepSetsOf(steps map[backend.LeaseRef][]backend.StepRecordParams, ids []int64, fences []int32, idx []int) *stepSets {
	out := &stepSets{}
	if steps == nil {
		return out
	}
	var names, results strings.Builder
	for _, i := range idx {
		recs := firstOfEachName(steps[backend.LeaseRef{ID: ids[i], Fence: fences[i]}])
		bytes := 0
		for k := 0; k < len(recs); {
			part := bytes / stepSetBytes
			names.Reset()
			results.Reset()
			names.WriteByte('{')
			results.WriteByte('[')
			first := k
			for ; k < len(recs) && bytes/stepSetBytes == part; k++ {
				if k > first {
					names.WriteByte(',')
					results.WriteByte(',')
				}
				arrayElem(&names, recs[k].Name)
				results.Write(recs[k].Result)
				bytes += len(recs[k].Result)
			}
			names.WriteByte('}')
			results.WriteByte(']')
			out.ids = append(out.ids, ids[i])
			out.first = append(out.first, recs[first].Name)
			out.names = append(out.names, names.String())
			out.result = append(out.result, results.String())
			out.parts = append(out.parts, int32(part))
		}
	}
	return out
}

// firstOfEachName returns a job's records without those whose name an
// earlier one of them has: a name is recorded once per job, as a record
// batch answers a repeated name with ErrStepRecorded. recs itself when no
// name repeats (the engine never repeats one in a run).
func firstOfEachName(recs []backend.StepRecordParams) []backend.StepRecordParams {
	repeated := func(k int) bool {
		for j := range k {
			if recs[j].Name == recs[k].Name {
				return true
			}
		}
		return false
	}
	for k := 1; k < len(recs); k++ {
		if repeated(k) {
			out := slices.Clone(recs[:k])
			for k++; k < len(recs); k++ {
				if !slices.ContainsFunc(out, func(r backend.StepRecordParams) bool { return r.Name == recs[k].Name }) {
					out = append(out, recs[k])
				}
			}
			return out
		}
	}
	return recs
}

// arrayElem writes s as a quoted element of a PostgreSQL array literal.
func arrayElem(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}

// genericPlanMax is the largest batch whose leased finish or heartbeat runs
// on a cached generic plan (genericPlanSettings) instead of being planned
// per call.
// In a steady queue (1,000 jobs/s, a finish every 2-3 jobs) planning the
// leased finish took 0.66 ms of server CPU a call, more than running it
// (0.36 ms), and a fifth of the server's CPU per job (pg_stat_statements
// with track_planning). Larger batches are planned per call, but for the
// deleted completion's (queryBatch): their planning is spread over their
// jobs, and the real array sizes choose their joins.
const genericPlanMax = 64

// genericPlanSettings make a statement run on its cached generic plan, built
// with bitmap scans as the only way into a table: the leased statements
// reach spool_leases only through the index of spans and the primary key,
// whatever the statistics say. Without them, PostgreSQL keeps planning
// per call on some connections (it compares the generic plan's cost with
// the custom plans'), and the generic plan it builds for a table whose
// statistics are small scans the table whole: with lease rows inserted and
// deleted at 1,000 a second, that read every dead version since the last
// vacuum (0.67 ms a call against 0.40 ms through the index).
// set_config(..., true) lasts until the end of the batch's implicit
// transaction. JIT is off (noJIT).
const genericPlanSettings = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
  set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true)` + noJIT

// noJIT, appended to a settings statement, turns JIT compilation off for
// the statement after it, as Open does for its sessions and claimSettings
// for claims: over a pool of the caller's (New), the server's jit setting
// (on by default) would apply. A plan that must use a scan these settings
// turn off carries PostgreSQL's disable cost (10^10), far above
// jit_above_cost and the inlining and optimisation thresholds, so a
// one-row finish or heartbeat was compiled with every option: 8.6 and
// 10.6 s of a loaded 2-core server for two one-job completions in a test
// run, during which the heartbeats of that job waited on its lease row
// and its lease ended (docs/testing.md, "Kept schemas and the sharded
// run").
const noJIT = `, set_config('jit', 'off', true)`

// dueAtOnce returns the ids whose outcome makes the job pending and due at
// once (a release, a snooze without delay: the rows the insert trigger
// announces, by spool_outcome_state), nil for none.
func dueAtOnce(ids []int64, outcomes []int16, delays []int64) map[int64]bool {
	var due map[int64]bool
	for i, o := range outcomes {
		if o == int16(backend.OutcomeRelease) || (o == int16(backend.OutcomeSnooze) && delays[i] <= 0) {
			if due == nil {
				due = map[int64]bool{}
			}
			due[ids[i]] = true
		}
	}
	return due
}

// quietSettings, appended to a settings statement, make the insert trigger
// return at once for the rows a leased finish moves back into spool_jobs
// when it is not the one to announce them: they passed the row rules when
// first written. In a steady queue, whose finishes carry a job or two, the
// trigger's two queries were about a tenth of a finish's server time.
const quietSettings = `, set_config('spool.wake', 'off', true)`

// smallPlanSettings run the small completions on their cached generic
// plan, through index scans only: the primary key is their one way into
// spool_jobs, and an index scan locks rows in id order, as every other
// statement over a batch does.
const smallPlanSettings = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
  set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)` + noJIT

// distinctIDs reports whether the ids at idx, in id order, are distinct
// (the small completions find each job's fence by its id).
func distinctIDs(ids []int64, idx []int) bool {
	for k := 1; k < len(idx); k++ {
		if ids[idx[k]] == ids[idx[k-1]] {
			return false
		}
	}
	return true
}

// queryBatch runs a finish or heartbeat statement over a batch of n jobs on
// db, and read consumes its rows. quiet says the statement writes no row
// the insert trigger need look at (quietSettings). On the pool (not in a
// caller's transaction, where the settings would outlast it) with prepared
// statements cached, each runs in one round trip after its settings: a
// small completion in place or a leased statement over a small batch on
// its generic plan (smallPlanSettings, genericPlanSettings), a larger
// completion in place through the primary key (inPlacePlanSettings), a leased
// statement over a larger batch planned per call with sequential scans
// off (widePlanSettings), any other planned per call (customPlanSettings).
// The deleted completion runs on its generic plan at any size: planning
// it per call cost a drain 0.7-0.8 µs of server CPU a job (1.7 ms for a
// batch of 1,000), and the generic plan runs a wide batch as fast (the
// same hash join of the batch with the lease rows' jobs): server CPU per
// job lower in 7 of 8 alternating drain pairs. The kept completion ran
// about 5% slower on its generic plan than planned per call, which took
// back the planning saved (pg_stat_statements, 2 runs each), so it and
// the other leased statements keep widePlanSettings.
// Elsewhere statements are planned per call by being sent unprepared
// (customPlan).
func (b *Backend) queryBatch(ctx context.Context, db DBTX, query string, quiet bool, n int, read func(pgx.Rows) error, args ...any) error {
	cached := db == DBTX(b.pool) && b.pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
	if !cached {
		rows, err := db.Query(ctx, query, b.customPlan(args...)...)
		if err != nil {
			return err
		}
		return read(rows)
	}
	settings := customPlanSettings
	switch {
	case query == b.sql.completeKeepSmall || query == b.sql.completeDeleteSmall:
		settings = smallPlanSettings
	case query == b.sql.completeKeep || query == b.sql.completeDelete:
		settings = inPlacePlanSettings
	case query == b.sql.completeLeasedDelete || b.sql.leased(query) && n <= genericPlanMax:
		settings = genericPlanSettings
	case b.sql.leased(query):
		settings = widePlanSettings
	}
	if quiet {
		settings += quietSettings
	}
	return b.queryIn(ctx, settings, query, args, read)
}

// customPlanSettings make a cached prepared statement planned with its
// arguments on every run (customPlan says why). A statement cached on the
// connection sends its arguments in binary; one sent unprepared
// (QueryExecModeExec) sends them as text, which the client formats and the
// server parses element by element for every id array of a finish.
const customPlanSettings = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true)` + noJIT

// inPlacePlanSettings plan the in-place completions of more than
// genericPlanMax jobs per call, as customPlanSettings do, with a nested
// loop over the batch and the primary key as the only way into spool_jobs.
// Planned freely, with statistics that count few running rows (taken
// before a drain claimed its jobs in place), the batch was hashed against
// a bitmap scan of every running row (BENCHMARKS.md, "Step records in
// sets; in-place completions through the primary key"). The batch is in
// id order, so the loop locks rows in id order, as every other statement
// over a batch does.
const inPlacePlanSettings = customPlanSettings + `, set_config('enable_hashjoin', 'off', true),
  set_config('enable_mergejoin', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`

// widePlanSettings plan a leased statement over more than genericPlanMax
// jobs per call, as customPlanSettings do, with sequential scans off, so
// that it finds its lease rows through the index of spans however few
// rows the statistics of spool_leases count. A drain's lease rows come and
// go at thousands a second: a sequential scan there (the form that had
// hashed the batch's ids against every lease row) read every dead version
// since the last vacuum, 2,000 to 7,000 of them in a drain, for a batch
// whose ids lie in a few rows. Through the index a drain deleting
// completed jobs used less server CPU per job in 4 of 4 alternating pairs
// (10.9 / 10.9 / 12.2 / 9.9 against 9.6 / 10.8 / 10.2 / 9.5 µs) and ran
// faster in all four (BENCHMARKS.md).
const widePlanSettings = customPlanSettings + `, set_config('enable_seqscan', 'off', true)`

// queryIn runs query on the pool, outside any transaction of the caller's,
// after the settings statement, in one round trip; read consumes its rows.
func (b *Backend) queryIn(ctx context.Context, settings, query string, args []any, read func(pgx.Rows) error) error {
	batch := &pgx.Batch{}
	batch.Queue(settings)
	batch.Queue(query, args...)
	br := b.pool.SendBatch(ctx, batch)
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		return read(rows)
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// customPlan returns the arguments of a statement over id arrays so that it
// is planned with its real arguments every time. Cached as a named prepared
// statement, PostgreSQL switches to a generic plan after five runs; for the
// finish and heartbeat statements that plan guesses unnest($1) at 10 rows,
// and after an ANALYZE taken while no job ran it guesses 1 running row and
// picks a nested loop over the whole running set: measured with 2,000
// finishes against 10,000 running rows, 11,333 ms generic vs 36.7 ms custom
// (bench scale --settle: 374 jobs/s). An unnamed statement is planned per
// call; QueryExecModeExec sends it with its arguments in one round trip
// (the statements cast every parameter, so their types need no describe
// step first, which cost a second round trip per finish and heartbeat).
// The simple protocol inlines the values and is planned per call already.
func (b *Backend) customPlan(args ...any) []any {
	switch b.pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		return append([]any{pgx.QueryExecModeExec}, args...)
	}
	return args
}

// allCompleted reports whether every outcome in fs is a plain success.
func allCompleted(fs []backend.JobFinish) bool {
	for _, f := range fs {
		if f.Outcome != backend.OutcomeComplete || f.Error != nil {
			return false
		}
	}
	return true
}
