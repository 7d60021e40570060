package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobFinishMany implements backend.Backend.
//
// Plain completions (no error), most of any batch, are finished by their
// ids, one fence at a time, in statements prepared once per size bucket
// (completes): an UPDATE, or a DELETE when completed rows are deleted. Every other outcome goes through finish_update.sql (and
// finish_delete.sql for completions with an error), over a JSON array.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(p.Finishes) == 0 {
		return &backend.JobFinishManyResult{}, nil
	}
	now := time.Now()
	plain, rest := splitPlain(p.Finishes)
	completes := newCompletes(plain, p.DeleteCompleted)
	if tx == nil {
		// The store's own transaction: prepared statements of its writer.
		if err := completes.prepare(ctx, b.st); err != nil {
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
	}
	// The step records the outcomes carry (backend.OutcomeStepWriter),
	// as sets, in one statement.
	var (
		sets    []*sql.Stmt
		steps   bool
		carried []backend.StepRecordParams
		grouped stepSets
	)
	if steps = backend.CarriesSteps(p.Finishes); steps {
		carried = backend.CarriedSteps(p.Finishes, nil)
		grouped = groupStepSets(carried)
		if tx == nil {
			if sets, err = prepareSets(ctx, b.st, &grouped); err != nil {
				return nil, fmt.Errorf("finish jobs: %w", err)
			}
		}
	}
	applied := make([]backend.LeaseRef, 0, len(p.Finishes))
	var wake map[string]struct{}
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		var err error
		applied = applied[:0]
		if steps {
			if err := writeSets(ctx, tx, sets, carried, &grouped, now, nil); err != nil {
				return fmt.Errorf("record steps: %w", err)
			}
		}
		if applied, err = completes.run(ctx, tx, now.UnixMicro(), applied); err != nil {
			return err
		}
		todo := rest
		if len(applied) < len(plain) {
			// The plain statements leave jobs with dependents alone (their
			// finish settles the dependents, below); those, and stale
			// leases, which it rejects again, take the general path.
			todo = append(slices.Clip(rest), leftPlain(plain, applied)...)
		}
		if len(todo) == 0 {
			return nil
		}
		input, err := encodeFinishes(todo, now)
		if err != nil {
			return err
		}
		if p.DeleteCompleted {
			rows, err := tx.QueryContext(ctx, stmt.finishDelete, nil, input)
			if err != nil {
				return err
			}
			if applied, err = appendLeases(applied, rows); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, stmt.finishUpdate, now.UnixMicro(), input, p.DeleteCompleted, false)
		if err != nil {
			return err
		}
		if applied, err = appendLeases(applied, rows); err != nil || len(applied) >= len(p.Finishes) {
			return err
		}
		// Jobs with dependents (which the statements above leave alone)
		// are finished, never deleted (their dependents read them), and
		// settled in the same transaction.
		first := len(applied)
		rows, err = tx.QueryContext(ctx, stmt.finishUpdate, now.UnixMicro(), input, false, true)
		if err != nil {
			return err
		}
		if applied, err = appendLeases(applied, rows); err != nil || len(applied) == first {
			return err
		}
		ids := make([]int64, 0, len(applied)-first)
		for _, l := range applied[first:] {
			ids = append(ids, l.ID)
		}
		if wake == nil {
			wake = map[string]struct{}{}
		}
		clear(wake)
		return settle(ctx, tx, ids, wake)
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(wake) > 0 {
		b.st.hub.PublishQueues(wake)
	}
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(p.Finishes, applied, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}

// WritesOutcomeSteps implements backend.OutcomeStepWriter: JobFinishMany
// writes the step records its outcomes carry in its own write
// transaction, before the outcomes, all of a batch in one statement, a
// set per job (step_sets.sql, writeSets), each record as StepRecord
// writes one (only while its lease holds the job; a name recorded already
// is left as it is). The store writes one transaction at a time, so a
// record written there has its outcome applied in the same transaction
// and commit, and one refused its outcome refused; the records of a job the outcome deletes go with
// it (the delete trigger of schema 11). BENCHMARKS.md, "SQLite and
// MariaDB: a batch's step records in one statement".
func (b *Backend) WritesOutcomeSteps() bool { return true }

// splitPlain separates plain completions (no error) from other outcomes,
// without a copy when every finish is one.
func splitPlain(fs []backend.JobFinish) (plain, rest []backend.JobFinish) {
	isPlain := func(f backend.JobFinish) bool { return f.Outcome == backend.OutcomeComplete && f.Error == nil }
	if !slices.ContainsFunc(fs, func(f backend.JobFinish) bool { return !isPlain(f) }) {
		return fs, nil
	}
	for _, f := range fs {
		if isPlain(f) {
			plain = append(plain, f)
		} else {
			rest = append(rest, f)
		}
	}
	return plain, rest
}

// leftPlain returns the plain completions whose leases applied lacks.
func leftPlain(plain []backend.JobFinish, applied []backend.LeaseRef) []backend.JobFinish {
	done := make(map[backend.LeaseRef]struct{}, len(applied))
	for _, l := range applied {
		done[l] = struct{}{}
	}
	var out []backend.JobFinish
	for _, f := range plain {
		if _, ok := done[f.Lease]; !ok {
			out = append(out, f)
		}
	}
	return out
}

// completeBuckets are the sizes, in ids, of the plain-completion
// statements: a fence's leases are cut into chunks of the largest and the
// last chunk is padded up to the smallest bucket that holds it (with its
// first id: an id twice in an IN list is applied once), so a writer compiles
// at most len(completeBuckets) statements per mode, whatever the batch sizes.
var completeBuckets = []int{1, 4, 16, 64, 256, 1024}

// completeSQLs holds the plain-completion statements by form (0: RETURNING
// the applied ids, 1: counting them only), mode (0 keep, 1 delete) and
// bucket, built once: the text is also the key of the writer's prepared
// statement.
var completeSQLs = sync.OnceValue(func() [2][2][]string {
	var out [2][2][]string
	for m, q := range []string{stmt.finishCompleteKeep, stmt.finishCompleteDelete} {
		counted, ok := strings.CutSuffix(strings.TrimSpace(q), "RETURNING id")
		if !ok {
			panic("sqlite backend: a plain-completion statement does not end in RETURNING id")
		}
		for f, q := range []string{q, counted} {
			for _, n := range completeBuckets {
				out[f][m] = append(out[f][m], strings.Replace(q, "{{ids}}", idParams("?3", n), 1))
			}
		}
	}
	return out
})

// idParams returns the parameters of an id list of n ids: first (a
// numbered parameter), then plain ?s, which SQLite numbers on from the
// largest number before them. Numbered ones would each be a name the
// statement keeps in a list, and the pure-Go driver asks for every
// parameter's name as it binds it, each a walk of that list: quadratic in
// the ids (BENCHMARKS.md, "SQLite: where the drain's write lock goes").
func idParams(first string, n int) string {
	var ids strings.Builder
	ids.WriteString(first)
	for range n - 1 {
		ids.WriteString(", ?")
	}
	return ids.String()
}

// completeChunk is the ids of one plain-completion statement: leases of
// one fence, at most the largest bucket of them.
type completeChunk struct {
	fence  int32
	ids    []int64
	bucket int // index in completeBuckets
}

// completes is the plain completions of one JobFinishMany, in chunks.
type completes struct {
	del    bool
	chunks []completeChunk
	// stmts are the chunks' statements returning the applied ids, counted
	// those counting them, prepared on the store's writer; nil for a
	// caller's tx.
	stmts, counted []*sql.Stmt
	// st is the store whose returnIDs the counting statements follow.
	st *store
}

// countedRest is how many plain-completion calls apply their chunks by
// the statements returning ids after a counted statement fell short (a
// job with dependents in the chunk, which the plain statements leave
// alone, or a lease lost): a store finishing jobs with dependents in most
// batches (a workflow) pays for a chunk applied twice at most once in
// countedRest+1 calls, a plain queue's never.
const countedRest = 16

// newCompletes groups fs by fence (a claim's leases mostly share one: the
// fence counts claims of a job) and cuts each group into chunks of at most
// the largest bucket, in the order of their first lease.
func newCompletes(fs []backend.JobFinish, del bool) *completes {
	c := &completes{del: del}
	if len(fs) == 0 {
		return c
	}
	var groups [][]int64
	var fences []int32
	first := fs[0].Lease.Fence
	if !slices.ContainsFunc(fs, func(f backend.JobFinish) bool { return f.Lease.Fence != first }) {
		ids := make([]int64, len(fs))
		for i, f := range fs {
			ids[i] = f.Lease.ID
		}
		groups, fences = [][]int64{ids}, []int32{first}
	} else {
		at := map[int32]int{}
		for _, f := range fs {
			g, ok := at[f.Lease.Fence]
			if !ok {
				g = len(groups)
				at[f.Lease.Fence] = g
				groups = append(groups, nil)
				fences = append(fences, f.Lease.Fence)
			}
			groups[g] = append(groups[g], f.Lease.ID)
		}
	}
	top := completeBuckets[len(completeBuckets)-1]
	for g, ids := range groups {
		for len(ids) > 0 {
			n := min(len(ids), top)
			b := slices.IndexFunc(completeBuckets, func(size int) bool { return size >= n })
			c.chunks = append(c.chunks, completeChunk{fence: fences[g], ids: ids[:n], bucket: b})
			ids = ids[n:]
		}
	}
	return c
}

// sql returns chunk i's statement text, in form 0 (returning the applied
// ids) or 1 (counting them).
func (c *completes) sql(i, form int) string {
	m := 0
	if c.del {
		m = 1
	}
	return completeSQLs()[form][m][c.chunks[i].bucket]
}

// prepare prepares each chunk's statements on the store's writer pool
// (compiled once per bucket, mode and form for the connection's life).
func (c *completes) prepare(ctx context.Context, st *store) error {
	counted := true
	for {
		n := st.returnIDs.Load()
		if n <= 0 {
			break
		}
		if st.returnIDs.CompareAndSwap(n, n-1) {
			counted = false
			break
		}
	}
	c.st = st
	for i := range c.chunks {
		s, err := st.prepared(ctx, c.sql(i, 0))
		if err != nil {
			return err
		}
		n, err := st.prepared(ctx, c.sql(i, 1))
		if err != nil {
			return err
		}
		c.stmts = append(c.stmts, s)
		if counted {
			c.counted = append(c.counted, n)
		}
	}
	return nil
}

// run applies every chunk in tx and appends the applied leases to out.
//
// In the store's own transaction a chunk is first applied by the statement
// that only counts the rows it changed: when every lease applied (nearly
// always), their ids are known without SQLite returning a row for each,
// which costs a step through the driver per job. Otherwise the chunk is
// rolled back to a savepoint and applied again by the statement that
// returns the ids it applied.
func (c *completes) run(ctx context.Context, tx *sql.Tx, now int64, out []backend.LeaseRef) ([]backend.LeaseRef, error) {
	var args []any
	for i, ch := range c.chunks {
		size := completeBuckets[ch.bucket]
		args = append(args[:0], now, int64(ch.fence))
		for _, id := range ch.ids {
			args = append(args, id)
		}
		for range size - len(ch.ids) {
			args = append(args, ch.ids[0])
		}
		if c.counted != nil {
			all, err := applyCounted(ctx, tx, c.counted[i], args, len(ch.ids))
			if err != nil {
				return out, err
			}
			if all {
				for _, id := range ch.ids {
					out = append(out, backend.LeaseRef{ID: id, Fence: ch.fence})
				}
				continue
			}
			c.st.returnIDs.Store(countedRest)
			c.counted = nil
		}
		var (
			rows *sql.Rows
			err  error
		)
		if c.stmts != nil {
			rows, err = tx.StmtContext(ctx, c.stmts[i]).QueryContext(ctx, args...)
		} else {
			rows, err = tx.QueryContext(ctx, c.sql(i, 0), args...)
		}
		if err != nil {
			return out, err
		}
		if out, err = appendIDs(out, rows, ch.fence); err != nil {
			return out, err
		}
	}
	return out, nil
}

// applyCounted applies a chunk of n distinct leases by s, which counts the
// rows it changed, inside a savepoint. It reports whether every lease
// applied; if not, the chunk is rolled back, for the caller to apply it
// again by the statement that returns which did.
func applyCounted(ctx context.Context, tx *sql.Tx, s *sql.Stmt, args []any, n int) (bool, error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT spool_complete"); err != nil {
		return false, err
	}
	res, err := tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	var changed int64
	if err == nil {
		changed, err = res.RowsAffected()
	}
	if err == nil && changed == int64(n) {
		_, err = tx.ExecContext(ctx, "RELEASE spool_complete")
		return err == nil, err
	}
	if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO spool_complete"); rerr != nil {
		return false, errors.Join(err, rerr)
	}
	if _, rerr := tx.ExecContext(ctx, "RELEASE spool_complete"); rerr != nil {
		return false, errors.Join(err, rerr)
	}
	return false, err
}

// appendIDs reads id rows, the leases of fence, onto out and closes rows.
func appendIDs(out []backend.LeaseRef, rows *sql.Rows, fence int32) ([]backend.LeaseRef, error) {
	defer rows.Close()
	var id int64 // one scan target for every row: a new one would escape each time
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return out, err
		}
		out = append(out, backend.LeaseRef{ID: id, Fence: fence})
	}
	return out, rows.Err()
}

// encodeFinishes renders finishes as finishInput's JSON array. Error entries
// carry the attempt, the message, the trace and the time of the write.
func encodeFinishes(fs []backend.JobFinish, now time.Time) (string, error) {
	buf := make([]byte, 0, len(fs)*32)
	buf = append(buf, '[')
	for i, f := range fs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, f.Lease.ID, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(f.Lease.Fence), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(f.Outcome), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, f.Delay.Microseconds(), 10)
		buf = append(buf, ',')
		if f.Error == nil {
			buf = append(buf, "null"...)
		} else {
			e := *f.Error
			e.At = now.UTC()
			enc, err := json.Marshal(e)
			if err != nil {
				return "", fmt.Errorf("encode error: %w", err)
			}
			buf = append(buf, enc...)
		}
		buf = append(buf, ']')
	}
	buf = append(buf, ']')
	return string(buf), nil
}

// appendLeases reads (id, fence) rows onto out and closes rows.
func appendLeases(out []backend.LeaseRef, rows *sql.Rows) ([]backend.LeaseRef, error) {
	defer rows.Close()
	var l backend.LeaseRef // one scan target for every row: a new one would escape each time
	for rows.Next() {
		if err := rows.Scan(&l.ID, &l.Fence); err != nil {
			return out, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// encodeLeases renders leases as a JSON array of [id, fence].
func encodeLeases(ls []backend.LeaseRef) string {
	buf := make([]byte, 0, len(ls)*20)
	buf = append(buf, '[')
	for i, l := range ls {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, l.ID, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(l.Fence), 10)
		buf = append(buf, ']')
	}
	buf = append(buf, ']')
	return string(buf)
}
