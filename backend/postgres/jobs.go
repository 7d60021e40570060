package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
)

// scanJob reads one row of jobColumns.
func scanJob(row pgx.Row) (*backend.JobRow, error) {
	var (
		j     backend.JobRow
		state string
		errs  []byte
		args  []byte
		meta  []byte
	)
	if err := row.Scan(&j.ID, &j.Queue, &j.Kind, &args, &state, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts,
		&j.Fence, &j.LeasedUntil, &j.LeasedBy, &j.CreatedAt, &j.AttemptedAt, &j.FinalizedAt, &errs, &j.Tags, &meta); err != nil {
		return nil, err
	}
	j.State = backend.State(state)
	j.Args = json.RawMessage(args)
	j.Metadata = json.RawMessage(meta)
	if len(errs) > 0 {
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
			return nil, fmt.Errorf("decode error history of job %d: %w", j.ID, err)
		}
	}
	return &j, nil
}

func collectJobs(rows pgx.Rows) ([]*backend.JobRow, error) {
	defer rows.Close()
	var out []*backend.JobRow
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// JobInsertMany implements backend.Backend. With ids wanted, every batch is
// one INSERT … SELECT FROM unnest (faster than COPY with ids reserved up
// front); with NoIDs, batches of CopyThreshold or more rows use COPY.
// Figures in BENCHMARKS.md (BenchmarkInsertMany).
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if len(p.Jobs) == 0 {
		return &backend.JobInsertManyResult{}, nil
	}
	if p.NoIDs && len(p.Jobs) >= b.copyThreshold {
		n, err := b.insertCopy(ctx, db, p.Jobs)
		if err != nil {
			return nil, fmt.Errorf("insert jobs (copy): %w", insertError(p.Tx, err))
		}
		return &backend.JobInsertManyResult{Count: n}, nil
	}
	n := len(p.Jobs)
	var (
		queues   = make([]string, n)
		kinds    = make([]string, n)
		args     = make([]json.RawMessage, n)
		prios    = make([]int16, n)
		runAts   = make([]*time.Time, n)
		delays   = make([]int64, n)
		maxAtt   = make([]int16, n)
		tags     = make([]string, n)
		metadata = make([]json.RawMessage, n)
	)
	for i, j := range p.Jobs {
		queues[i], kinds[i], args[i], prios[i] = j.Queue, j.Kind, j.Args, j.Priority
		runAts[i], delays[i], maxAtt[i] = j.RunAt, micros(j.Delay), j.MaxAttempts
		tags[i] = strings.Join(j.Tags, ",")
		if len(j.Metadata) > 0 {
			metadata[i] = j.Metadata
		}
	}
	rows, err := db.Query(ctx, b.sql.insert, queues, kinds, args, prios, runAts, delays, maxAtt, tags, metadata)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", insertError(p.Tx, err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", insertError(p.Tx, err))
	}
	if len(ids) != n {
		return nil, fmt.Errorf("insert jobs: inserted %d of %d rows", len(ids), n)
	}
	return &backend.JobInsertManyResult{IDs: ids, Count: n}, nil
}

var copyColumns = []string{"queue", "kind", "args", "priority", "run_at", "state", "max_attempts", "tags", "metadata"}

// insertCopy writes jobs with COPY; ids come from the column default. Run
// times are on the database clock: one SELECT now() when any job is delayed.
func (b *Backend) insertCopy(ctx context.Context, db DBTX, jobs []*backend.JobInsertParams) (int, error) {
	var now time.Time
	for _, j := range jobs {
		if j.RunAt == nil {
			if err := db.QueryRow(ctx, b.sql.now).Scan(&now); err != nil {
				return 0, fmt.Errorf("read database clock: %w", notWritten(err))
			}
			break
		}
	}
	rows := make([][]any, len(jobs))
	for i, j := range jobs {
		at := now.Add(j.Delay)
		if j.RunAt != nil {
			at = *j.RunAt
		}
		state := backend.StateAvailable
		if at.After(now) {
			state = backend.StateScheduled
		}
		tags := j.Tags
		if tags == nil {
			tags = []string{}
		}
		meta := j.Metadata
		if len(meta) == 0 {
			meta = json.RawMessage(`{}`)
		}
		rows[i] = []any{j.Queue, j.Kind, j.Args, j.Priority, at, string(state), j.MaxAttempts, tags, meta}
	}
	n, err := db.CopyFrom(ctx, pgx.Identifier{b.schema, "spool_jobs"}, copyColumns, pgx.CopyFromRows(rows))
	if err != nil {
		return 0, err
	}
	if int(n) != len(jobs) {
		return 0, fmt.Errorf("copied %d of %d rows", n, len(jobs))
	}
	return len(jobs), nil
}

// JobClaim implements backend.Backend. Rows come back in claim order.
//
// The claim runs in a transaction of its own with sorts and bitmap scans
// switched off for that transaction only, sent as one pipelined round trip.
// Without that, a table whose statistics lag its backlog (a fresh install
// hit by a burst, any table between autovacuum analyses) is planned as a
// bitmap scan plus a sort of every pending row: measured on 1,000,000 fresh
// rows, 302 ms per 1,100-job claim instead of 5.3 ms via the ordered index.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if b.strategy == StrategyOptimistic {
		return b.claimOptimistic(ctx, p)
	}
	ticket := b.floors.begin(p.Queue, time.Now())
	if ticket.probe {
		b.startProbe(p.Queue, ticket.bound)
	}
	var jobs []*backend.JobRow
	err := b.queryInTx(ctx, "BEGIN", func(rows pgx.Rows) (err error) {
		jobs, err = collectJobs(rows)
		return err
	}, b.sql.claim, p.Queue, p.Max, micros(p.Lease), p.ClaimID, ticket.bound.priority, ticket.bound.runAt, ticket.bound.id)
	if err != nil {
		b.floors.end(ticket, nil, time.Now())
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	// UPDATE … RETURNING does not keep the CTE's order.
	slices.SortFunc(jobs, func(a, b *backend.JobRow) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	var last *claimKey
	if len(jobs) > 0 {
		j := jobs[len(jobs)-1]
		last = &claimKey{priority: j.Priority, runAt: j.RunAt, id: j.ID}
	}
	b.floors.end(ticket, last, time.Now())
	return jobs, nil
}

// startProbe looks, off the claim path, for a pending row of queue at or
// below bound that claims above the floor would miss, and lowers the floor
// to it (floor.go). Errors only delay the next look.
func (b *Backend) startProbe(queue string, bound claimKey) {
	b.probes.Add(1)
	go func() {
		defer b.probes.Done()
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		started := time.Now()
		var found *claimKey
		_ = b.queryInTx(ctx, "BEGIN READ ONLY", func(rows pgx.Rows) error {
			defer rows.Close()
			if rows.Next() {
				var k claimKey
				if err := rows.Scan(&k.priority, &k.runAt, &k.id); err != nil {
					return err
				}
				found = &k
			}
			return rows.Err()
		}, b.sql.probeBelow, queue, bound.priority, bound.runAt, bound.id)
		b.floors.probed(queue, found, time.Since(started), time.Now())
	}()
}

// claimSettings steer the claim's plan to the ordered index scans whatever
// the statistics say, and joins of picked ids to nested loops of
// primary-key lookups (the estimate of the two arms' union makes a hash join
// over the whole table look cheaper: 55 ms instead of 9.7 ms per 1,000 jobs
// from 100,000; the optimistic claim's loop over sorted arrays locks rows in
// id order, so concurrent claims cannot deadlock), and turn JIT off: the
// second arm's LIMIT is an expression, estimated at a tenth of the table, so
// behind a large backlog the claim's cost passed jit_above_cost and each
// claim spent 25-70 ms compiling (bench scale, 10,000,000 queued: 1,690
// jobs/s). set_config(..., true) lasts until the end of the transaction.
const claimSettings = `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
  set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
  set_config('jit', 'off', true)`

// queryInTx runs query in a transaction of its own with claimSettings, as
// one pipelined round trip: begin ("BEGIN" or "BEGIN READ ONLY"), the
// settings, the query, whose rows read consumes, and COMMIT. What read saw
// counts only once COMMIT has succeeded.
func (b *Backend) queryInTx(ctx context.Context, begin string, read func(pgx.Rows) error, query string, args ...any) error {
	batch := &pgx.Batch{}
	batch.Queue(begin)
	batch.Queue(claimSettings)
	batch.Queue(query, args...)
	batch.Queue("COMMIT")
	br := b.pool.SendBatch(ctx, batch)
	err := readInTx(br, read)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// readInTx reads the results of queryInTx's batch.
func readInTx(br pgx.BatchResults, read func(pgx.Rows) error) error {
	for range 2 { // begin, settings
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	if err := read(rows); err != nil {
		return err
	}
	_, err = br.Exec() // COMMIT
	return err
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	// The released rows keep their keys, below the floor: claim from the
	// head again.
	defer b.floors.resetAll()
	tag, err := b.pool.Exec(ctx, b.sql.releaseClaim, p.ClaimID)
	if err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	return int(tag.RowsAffected()), nil
}

// JobFinishMany implements backend.Backend.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(p.Finishes) == 0 {
		return &backend.JobFinishManyResult{}, nil
	}
	// Lock rows in id order, as heartbeats do, so two batches never deadlock.
	fs := slices.Clone(p.Finishes)
	slices.SortFunc(fs, func(a, b backend.JobFinish) int { return int(a.Lease.ID - b.Lease.ID) })
	n := len(fs)
	if allCompleted(fs) {
		return b.completeMany(ctx, db, fs, p.DeleteCompleted)
	}
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
	rows, err := db.Query(ctx, b.sql.finish, b.customPlan(ids, fences, outcomes, delays, errs, p.DeleteCompleted)...)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	done, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend.LeaseRef, error) {
		var (
			l     backend.LeaseRef
			queue *string
			key   claimKey
		)
		err := r.Scan(&l.ID, &l.Fence, &queue, &key.priority, &key.runAt)
		if err == nil && queue != nil {
			key.id = l.ID
			b.floors.lower(*queue, key)
		}
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(fs, done, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
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

// completeMany writes a batch of successes (fs sorted by id) with the
// lighter completeKeep or completeDelete statement.
func (b *Backend) completeMany(ctx context.Context, db DBTX, fs []backend.JobFinish, deleteCompleted bool) (*backend.JobFinishManyResult, error) {
	ids := make([]int64, len(fs))
	fences := make([]int32, len(fs))
	for i, f := range fs {
		ids[i], fences[i] = f.Lease.ID, f.Lease.Fence
	}
	query := b.sql.completeKeep
	if deleteCompleted {
		query = b.sql.completeDelete
	}
	rows, err := db.Query(ctx, query, b.customPlan(ids, fences)...)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	done, err := collectLeases(rows)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(fs, done, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}

// customPlan returns the arguments of a statement over id arrays so that it
// is planned with its real arguments every time. Cached as a named prepared
// statement, PostgreSQL switches to a generic plan after five runs; for the
// finish and heartbeat statements that plan guesses unnest($1) at 10 rows,
// and after an ANALYZE taken while no job ran it guesses 1 running row and
// picks a nested loop over the whole running set: measured with 2,000
// finishes against 10,000 running rows, 11,333 ms generic vs 36.7 ms custom
// (bench scale --settle: 374 jobs/s). An unnamed statement (parse, describe,
// execute) is planned per call; the simple protocol inlines the values and
// is planned per call already.
func (b *Backend) customPlan(args ...any) []any {
	switch b.pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		return append([]any{pgx.QueryExecModeDescribeExec}, args...)
	}
	return args
}

// collectLeases reads (id, fence) rows.
func collectLeases(rows pgx.Rows) ([]backend.LeaseRef, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend.LeaseRef, error) {
		var l backend.LeaseRef
		err := r.Scan(&l.ID, &l.Fence)
		return l, err
	})
}

// JobHeartbeatMany implements backend.Backend.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if len(p.Leases) == 0 {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	ls := slices.Clone(p.Leases)
	slices.SortFunc(ls, func(a, b backend.LeaseRef) int { return int(a.ID - b.ID) })
	ids := make([]int64, len(ls))
	fences := make([]int32, len(ls))
	for i, l := range ls {
		ids[i], fences[i] = l.ID, l.Fence
	}
	rows, err := b.pool.Query(ctx, b.sql.heartbeat, b.customPlan(ids, fences, micros(p.Lease))...)
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	done, err := collectLeases(rows)
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	return &backend.JobHeartbeatManyResult{Lost: backend.Unapplied(ls, done, func(l backend.LeaseRef) backend.LeaseRef { return l })}, nil
}

// JobRescue implements backend.Backend.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	max := p.MaxOrDefault()
	rows, err := b.pool.Query(ctx, b.sql.rescue, max)
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	res := &backend.JobRescueResult{}
	var (
		state, queue string
		key          claimKey
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &queue, &key.priority, &key.runAt, &key.id}, func() error {
		if backend.State(state) == backend.StateDiscarded {
			res.Discarded++
		} else {
			res.Retried++
			b.floors.lower(queue, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	return res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	max := p.MaxOrDefault()
	tag, err := b.pool.Exec(ctx, b.sql.cleanup, micros(p.CompletedAge), micros(p.DiscardedAge), micros(p.CancelledAge), max)
	if err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	j, err := scanJob(b.pool.QueryRow(ctx, b.sql.get, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, backend.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// JobList implements backend.Backend.
func (b *Backend) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	limit := p.LimitOrDefault()
	states := p.StateNames()
	rows, err := b.pool.Query(ctx, b.sql.list, p.Queue, p.Kind, states, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// JobRetry implements backend.Backend.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	j, err := b.changeJob(ctx, "retry", b.sql.retry, p.ID)
	if err == nil {
		b.floors.lower(j.Queue, claimKey{priority: j.Priority, runAt: j.RunAt, id: j.ID})
	}
	return j, err
}

// JobCancel implements backend.Backend. Cancelling a running job also sends
// a notification, so its lease holder can stop it without waiting for its
// next heartbeat.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	j, err := b.changeJob(ctx, "cancel", b.sql.cancel, p.ID)
	if err != nil {
		return nil, err
	}
	if j.AttemptedAt != nil && j.Attempt > 0 {
		// A hint only: the cancellation is committed whether or not it is sent.
		if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, b.channel, cancelPrefix+strconv.FormatInt(j.ID, 10)); err != nil {
			return j, nil
		}
	}
	return j, nil
}

// cancelPrefix marks a cancel notification; queue names cannot contain ':'.
const cancelPrefix = "cancel:"

// changeJob runs a single-job state change and tells "no such job" from "not
// allowed in its state" when the update matched nothing.
func (b *Backend) changeJob(ctx context.Context, op, query string, id int64) (*backend.JobRow, error) {
	j, err := scanJob(b.pool.QueryRow(ctx, query, id))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := b.JobGet(ctx, id)
		if errors.Is(gerr, backend.ErrNotFound) {
			return nil, fmt.Errorf("%s job %d: %w", op, id, backend.ErrNotFound)
		}
		if gerr != nil {
			return nil, fmt.Errorf("%s job %d: %w", op, id, gerr)
		}
		return nil, fmt.Errorf("%s job %d (state %s): %w", op, id, cur.State, backend.ErrInvalidState)
	}
	if err != nil {
		return nil, fmt.Errorf("%s job %d: %w", op, id, err)
	}
	return j, nil
}

// QueueStatsAll implements backend.Backend.
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	rows, err := b.pool.Query(ctx, b.sql.stats)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rows.Close()
	out, err := backend.CollectQueueStats(rows)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return out, nil
}

// LeaderElect implements backend.Backend.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	var leader string
	err := b.pool.QueryRow(ctx, b.sql.leaderElect, p.Name, p.ClientID, micros(p.TTL)).Scan(&leader)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return leader == p.ClientID, nil
}

// LeaderResign implements backend.Backend.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	if _, err := b.pool.Exec(ctx, b.sql.leaderResign, p.Name, p.ClientID); err != nil {
		return fmt.Errorf("resign leader: %w", err)
	}
	return nil
}

// Listen implements backend.Notifier on a dedicated connection from the pool.
// The connection is closed, not returned, when Listen ends: it may still be
// subscribed or mid-wait.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Claim floors rely on seeing every insert notification from here on.
	b.floors.listen(+1)
	defer b.floors.listen(-1)
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("listen: %w", err)
		}
		if id, ok := strings.CutPrefix(n.Payload, cancelPrefix); ok {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				onWake(backend.Wake{CancelledID: n})
			}
			continue
		}
		queue, key, ok := parseInsertNotice(n.Payload)
		if ok {
			b.floors.lower(queue, key)
		} else {
			b.floors.reset(queue)
		}
		onWake(backend.Wake{Queue: queue})
	}
}
