package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
	stepRecord, stepSets, setsUnwritten, held, signalSent, jobWait, signalInsert string
	signalWake, jobQueue, stepsOf, signalsOf, waitOf                             string
}

var stepStmt = func() stepStatements {
	var s stepStatements
	err := sqltext.Load(stepFiles, "sql/steps", strings.NewReplacer(), map[string]*string{
		"step_record": &s.stepRecord, "step_sets": &s.stepSets, "sets_unwritten": &s.setsUnwritten, "held": &s.held, "signal_sent": &s.signalSent, "job_wait": &s.jobWait,
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

// StepRecordMany implements backend.StepStore: one write transaction, the
// batch's records written as sets, one per job and lease, with a
// statement per chunk of sets (writeSets).
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	out := make([]backend.StepRecordResult, len(p.Steps))
	if len(p.Steps) == 0 {
		return out, nil
	}
	g := groupStepSets(p.Steps)
	stmts, err := prepareSets(ctx, b.st, &g)
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", err)
	}
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		clear(out)
		return writeSets(ctx, tx, stmts, p.Steps, &g, time.Now(), out)
	})
	if err != nil {
		return nil, fmt.Errorf("record steps: %w", err)
	}
	return out, nil
}

// stepSets is a write's step records grouped for step_sets.sql: one set
// per job and lease, its records in the order given.
type stepSets struct {
	// leases, names and results are the sets': each one's lease, and its
	// names and results as JSON arrays (the results' texts as JSON
	// strings, so each is kept byte for byte).
	leases         []backend.LeaseRef
	names, results []string
	// order lists the records set by set, in lease order; set i is
	// order[ends[i-1]:ends[i]] (from 0 for the first), its records in
	// the order given.
	order, ends []int
	// rest are the records no set carries (a name given twice for one
	// lease): written one by one after the sets.
	rest []int
	// ok is false when a name or result is not valid UTF-8, which JSON
	// would not carry unchanged: every record is written one by one.
	ok bool
}

// groupStepSets groups rs into sets, in the order of their leases.
func groupStepSets(rs []backend.StepRecordParams) stepSets {
	for i := range rs {
		if !utf8.ValidString(rs[i].Name) || !utf8.Valid(rs[i].Result) {
			return stepSets{}
		}
	}
	g := stepSets{ok: true, order: make([]int, 0, len(rs))}
	// A run's records come together, and the outcomes of a batch are
	// mostly in lease order already: sort (stably, keeping each set's
	// order) only when they are not.
	byLease := make([]int, len(rs))
	sorted := true
	for i := range byLease {
		byLease[i] = i
		if i > 0 && compareLeases(rs[i-1].Lease, rs[i].Lease) > 0 {
			sorted = false
		}
	}
	if !sorted {
		slices.SortStableFunc(byLease, func(a, b int) int { return compareLeases(rs[a].Lease, rs[b].Lease) })
	}
	var seen map[string]struct{} // names of a large set
	for from := 0; from < len(byLease); {
		l := rs[byLease[from]].Lease
		to := from + 1
		for to < len(byLease) && rs[byLease[to]].Lease == l {
			to++
		}
		first := len(g.order)
		if to-from > 16 {
			if seen == nil {
				seen = map[string]struct{}{}
			}
			clear(seen)
		}
		for _, i := range byLease[from:to] {
			name := rs[i].Name
			dup := false
			if to-from > 16 {
				_, dup = seen[name]
				seen[name] = struct{}{}
			} else {
				for _, j := range g.order[first:] {
					if rs[j].Name == name {
						dup = true
						break
					}
				}
			}
			if dup {
				g.rest = append(g.rest, i)
			} else {
				g.order = append(g.order, i)
			}
		}
		g.leases = append(g.leases, l)
		g.ends = append(g.ends, len(g.order))
		from = to
	}
	// Every set's arrays in one string, sliced.
	size := 0
	for i := range rs {
		size += len(rs[i].Name) + len(rs[i].Result) + 8
	}
	buf := make([]byte, 0, size+len(g.ends)*4)
	cuts := make([]int, 0, 2*len(g.ends)+1)
	from := 0
	for _, end := range g.ends {
		set := g.order[from:end]
		from = end
		cuts = append(cuts, len(buf))
		buf = append(buf, '[')
		for j, i := range set {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, rs[i].Name)
		}
		buf = append(buf, ']')
		cuts = append(cuts, len(buf))
		buf = append(buf, '[')
		for j, i := range set {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, string(rs[i].Result))
		}
		buf = append(buf, ']')
	}
	cuts = append(cuts, len(buf))
	text := string(buf)
	g.names, g.results = make([]string, len(g.ends)), make([]string, len(g.ends))
	for k := range g.ends {
		g.names[k], g.results[k] = text[cuts[2*k]:cuts[2*k+1]], text[cuts[2*k+1]:cuts[2*k+2]]
	}
	return g
}

// compareLeases orders leases by job, then fence.
func compareLeases(a, b backend.LeaseRef) int {
	if c := cmp.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.Fence, b.Fence)
}

// appendJSONString appends s, valid UTF-8, as a JSON string whose value
// is s exactly: '"', '\\' and control characters escaped, the rest as is.
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\r':
			buf = append(buf, '\\', 'r')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// setBuckets are the sizes, in sets, of step_sets.sql's statements, as
// completeBuckets are for completions: a write's sets are cut into chunks
// of the largest and the last one padded (with rows that match no job) up
// to the smallest bucket that holds it, so a writer compiles at most
// len(setBuckets) of them.
var setBuckets = []int{1, 4, 16, 64, 256}

// setParams is how many parameters a set takes in step_sets.sql.
const setParams = 5

// setSQLs are step_sets.sql by bucket, built once: the text is also the
// key of the writer's prepared statement.
var setSQLs = sync.OnceValue(func() []string {
	var out []string
	for _, n := range setBuckets {
		var rows strings.Builder
		for i := range n {
			if i > 0 {
				rows.WriteString(", ")
			}
			k := 2 + setParams*i
			fmt.Fprintf(&rows, "(?%d, ?%d, ?%d, ?%d, ?%d)", k, k+1, k+2, k+3, k+4)
		}
		out = append(out, strings.Replace(stepStmt.stepSets, "{{sets}}", rows.String(), 1))
	}
	return out
})

// setBucket is the index of the smallest bucket that holds n sets, n at
// most the largest.
func setBucket(n int) int {
	return slices.IndexFunc(setBuckets, func(size int) bool { return size >= n })
}

// prepareSets prepares on the store's writer the statements that write
// g's sets (nil when g is not ok), in chunk order.
func prepareSets(ctx context.Context, st *store, g *stepSets) ([]*sql.Stmt, error) {
	if !g.ok {
		return nil, nil
	}
	top := setBuckets[len(setBuckets)-1]
	var out []*sql.Stmt
	for from := 0; from < len(g.ends); from += top {
		s, err := st.prepared(ctx, setSQLs()[setBucket(min(len(g.ends)-from, top))])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// writeSets writes the records rs, grouped as g (groupStepSets of rs), in
// tx at now: the sets with a statement per chunk of them (step_sets.sql,
// through stmts, prepareSets's, when not nil), and one by one (recordStep)
// the records of the sets it did not write (a lease that no longer holds,
// a name the job has recorded), those no set carries, or all of them when
// g is not ok. With out, it reports each record's result there.
func writeSets(ctx context.Context, tx *sql.Tx, stmts []*sql.Stmt, rs []backend.StepRecordParams, g *stepSets, now time.Time, out []backend.StepRecordResult) error {
	one := func(i int) error {
		ok, err := recordStep(ctx, tx, &rs[i], now)
		if err != nil && !errors.Is(err, backend.ErrStepRecorded) {
			return fmt.Errorf("record step %q of job %d: %w", rs[i].Name, rs[i].Lease.ID, err)
		}
		if out != nil {
			out[i] = backend.StepRecordResult{Recorded: ok, Err: err}
		}
		return nil
	}
	if !g.ok {
		for i := range rs {
			if err := one(i); err != nil {
				return err
			}
		}
		return nil
	}
	top := setBuckets[len(setBuckets)-1]
	var written int64
	var args []any
	for c, from := 0, 0; from < len(g.ends); c, from = c+1, from+top {
		to := min(from+top, len(g.ends))
		b := setBucket(to - from)
		args = append(args[:0], now.UnixMicro())
		for k := from; k < to; k++ {
			l := g.leases[k]
			args = append(args, l.ID, int64(l.Fence), rs[g.order[g.first(k)]].Name, g.names[k], g.results[k])
		}
		for range setBuckets[b] - (to - from) {
			args = append(args, nil, nil, nil, nil, nil) // a row no job matches
		}
		var (
			res sql.Result
			err error
		)
		if stmts != nil {
			res, err = tx.StmtContext(ctx, stmts[c]).ExecContext(ctx, args...)
		} else {
			res, err = tx.ExecContext(ctx, setSQLs()[b], args...)
		}
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		written += n
	}
	var unwritten []int
	if int(written) < len(g.ends) {
		var err error
		if unwritten, err = setsUnwritten(ctx, tx, rs, g, now); err != nil {
			return err
		}
	}
	from := 0
	for k, end := range g.ends {
		set := g.order[from:end]
		from = end
		if len(unwritten) > 0 && unwritten[0] == k {
			unwritten = unwritten[1:]
			for _, i := range set {
				if err := one(i); err != nil {
					return err
				}
			}
			continue
		}
		if out != nil {
			for _, i := range set {
				out[i].Recorded = true
			}
		}
	}
	for _, i := range g.rest {
		if err := one(i); err != nil {
			return err
		}
	}
	return nil
}

// first is the position in order of set k's first record.
func (g *stepSets) first(k int) int {
	if k == 0 {
		return 0
	}
	return g.ends[k-1]
}

// setsUnwritten returns the positions of the sets of g that step_sets.sql,
// run at now, did not write, in order.
func setsUnwritten(ctx context.Context, tx *sql.Tx, rs []backend.StepRecordParams, g *stepSets, now time.Time) ([]int, error) {
	buf := []byte{'['}
	for k, l := range g.leases {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, "[%d,%d,", l.ID, l.Fence)
		buf = appendJSONString(buf, rs[g.order[g.first(k)]].Name)
		buf = append(buf, ']')
	}
	buf = append(buf, ']')
	rows, err := tx.QueryContext(ctx, stepStmt.setsUnwritten, string(buf), now.UnixMicro())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var k int
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
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
