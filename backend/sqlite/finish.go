package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobFinishMany implements backend.Backend.
//
// Plain completions (no error), most of any batch, are finished by their
// leases bound as VALUES rows, in statements prepared once per size bucket
// (finishCompletes): one statement per bucket, a DELETE when completed rows
// are deleted. Every other outcome goes through finish_update.sql (and
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
	applied := make([]backend.LeaseRef, 0, len(p.Finishes))
	var wake map[string]struct{}
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		var err error
		applied = applied[:0]
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

// completeBuckets are the sizes, in leases, of the plain-completion
// statements: a batch is cut into chunks of the largest and the last chunk
// is padded up to the smallest bucket that holds it (with its first lease:
// a lease twice in an IN list is applied once), so a writer compiles at
// most len(completeBuckets) statements per mode, whatever the batch sizes.
var completeBuckets = []int{1, 4, 16, 64, 256, 1024}

// completes is the plain completions of one JobFinishMany, in chunks.
type completes struct {
	del    bool
	chunks [][]backend.JobFinish
	sizes  []int       // bucket of each chunk
	stmts  []*sql.Stmt // prepared on the store's writer; nil for a caller's tx
}

// newCompletes cuts fs into chunks of at most the largest bucket.
func newCompletes(fs []backend.JobFinish, del bool) *completes {
	c := &completes{del: del}
	top := completeBuckets[len(completeBuckets)-1]
	for len(fs) > 0 {
		n := min(len(fs), top)
		c.chunks = append(c.chunks, fs[:n])
		fs = fs[n:]
		size := top
		for _, b := range completeBuckets {
			if b >= n {
				size = b
				break
			}
		}
		c.sizes = append(c.sizes, size)
	}
	return c
}

// completeSQL returns the statement for a bucket of n leases.
func completeSQL(n int, del bool) string {
	var pairs strings.Builder
	pairs.Grow(n * 16)
	for i := range n {
		if i > 0 {
			pairs.WriteString(", ")
		}
		fmt.Fprintf(&pairs, "(?%d, ?%d)", 2+2*i, 3+2*i)
	}
	q := stmt.finishCompleteKeep
	if del {
		q = stmt.finishCompleteDelete
	}
	return strings.Replace(q, "{{pairs}}", pairs.String(), 1)
}

// prepare prepares each chunk's statement on the store's writer pool
// (compiled once per bucket and mode for the connection's life).
func (c *completes) prepare(ctx context.Context, st *store) error {
	for _, n := range c.sizes {
		s, err := st.prepared(ctx, completeSQL(n, c.del))
		if err != nil {
			return err
		}
		c.stmts = append(c.stmts, s)
	}
	return nil
}

// run applies every chunk in tx and appends the applied leases to out.
func (c *completes) run(ctx context.Context, tx *sql.Tx, now int64, out []backend.LeaseRef) ([]backend.LeaseRef, error) {
	for i, chunk := range c.chunks {
		n := c.sizes[i]
		args := make([]any, 1, 1+2*n)
		args[0] = now
		for _, f := range chunk {
			args = append(args, f.Lease.ID, int64(f.Lease.Fence))
		}
		for len(args) < cap(args) {
			args = append(args, chunk[0].Lease.ID, int64(chunk[0].Lease.Fence))
		}
		var (
			rows *sql.Rows
			err  error
		)
		if c.stmts != nil {
			rows, err = tx.StmtContext(ctx, c.stmts[i]).QueryContext(ctx, args...)
		} else {
			rows, err = tx.QueryContext(ctx, completeSQL(n, c.del), args...)
		}
		if err != nil {
			return out, err
		}
		if out, err = appendLeases(out, rows); err != nil {
			return out, err
		}
	}
	return out, nil
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
	for rows.Next() {
		var l backend.LeaseRef
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
