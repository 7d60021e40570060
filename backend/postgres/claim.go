package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// JobClaim implements backend.Backend. Rows come back in claim order.
//
// The claim runs in a transaction of its own with sorts and bitmap scans
// switched off for that transaction only, sent as one pipelined round trip,
// after the queue's claim lock when Options.ClaimLock asks for it
// (claim_lock.sql: the lock is taken and released within that round trip,
// so no client's pause holds it). That transaction is the pipeline's
// implicit one: the server runs every statement up to the batch's one Sync
// in a single transaction and commits it at the Sync (a failed statement
// rolls it back), so no BEGIN or COMMIT statement is sent; the settings
// (set_config(..., true)) last until that commit.
// Without that, a table whose statistics lag its backlog (a fresh install
// hit by a burst, any table between autovacuum analyses) is planned as a
// bitmap scan plus a sort of every pending row: measured on 1,000,000 fresh
// rows, 302 ms per 1,100-job claim instead of 5.3 ms via the ordered index.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if b.strategy == StrategyOptimistic {
		return b.claimOptimistic(ctx, p)
	}
	// A claim expected to be small leaves its jobs in place: lease rows pay
	// only for larger batches (smallClaimMax). The expectation comes from
	// the queue's last claim, which a backlog that arrived since (a
	// workflow's fan-out released at once, a burst of inserts) proves
	// wrong: such a claim takes smallClaimMax jobs in place and, when it
	// comes back full, the rest of its ask into lease rows, in a second
	// claim, rather than hundreds of jobs in place, each of which costs the
	// claim and the finish about twice a leased job's server time
	// (BENCHMARKS.md, "A DAG task's completion against a plain job's").
	small := b.inPlace || (!b.leaseRows && b.small.Small(p.Queue))
	if !small {
		return b.claimWith(ctx, b.sql.claim, p, p.Max)
	}
	if b.inPlace || p.Max <= smallClaimMax {
		return b.claimWith(ctx, b.sql.claimSmall, p, p.Max)
	}
	jobs, err := b.claimWith(ctx, b.sql.claimSmall, p, smallClaimMax)
	if err != nil || len(jobs) < smallClaimMax {
		return jobs, err
	}
	rest, err := b.claimWith(ctx, b.sql.claim, p, p.Max-len(jobs))
	if err != nil {
		// The second claim's reply may be lost after its commit: the
		// error makes the producer hand back the whole claim
		// (JobReleaseClaim, by the claim id both share), the first
		// part's jobs with it.
		return nil, err
	}
	return append(jobs, rest...), nil
}

// claimWith runs one claim of up to n jobs of p's queue with query
// (claim.sql or claim_small.sql) and records what it took.
func (b *Backend) claimWith(ctx context.Context, query string, p *backend.JobClaimParams, n int) ([]*backend.JobRow, error) {
	small := query == b.sql.claimSmall
	var jobs []*backend.JobRow
	batch := &pgx.Batch{}
	batch.Queue(b.jobClaimTx)
	// Only claims into lease rows take the lock: they are the ones that
	// step over each other's rows in a backlog, while a small claim in
	// place takes a few jobs and, waiting for the lock, would wait for
	// another claim's WAL flush.
	locked := b.claimLock && !small
	if locked {
		give, err := b.claimTurns.take(ctx, p.Queue)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: wait for the process's turn: %w", err)
		}
		defer give()
		batch.Queue(b.sql.claimLock, p.Queue)
	}
	floored := b.queueFloored(batch, &jobs, query, p.Queue, n, p.Lease, p.ClaimID, locked)
	// Close returns the first error, the commit's at the Sync included:
	// the floor moves only for a claim that committed.
	err := b.pool.SendBatch(ctx, batch).Close()
	floored(err)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", markNoConnectionFree(err))
	}
	if small {
		b.placed.add(jobs)
	}
	b.dependents.addDependents(jobs)
	b.small.Claimed(p.Queue, len(jobs), n)
	return jobs, nil
}

// queueFloored queues on batch a claim statement that starts at queue's
// claim floor (claim.sql, claim_in_place.sql, claim_small.sql,
// flow_quick.sql: queue, n, lease, claim id, the floor's key, then extra),
// its rows read into jobs. claim.sql is also given the shared floor's
// arguments: locked says the claim holds the queue's claim lock, under
// which it may start at the shared floor and writes its end there. The returned function, called with the batch's error once it is back, sorts
// jobs into claim order (UPDATE … RETURNING does not keep the CTE's) and
// moves the floor past the last, or leaves the floor on an error.
func (b *Backend) queueFloored(batch *pgx.Batch, jobs *[]*backend.JobRow, query, queue string, n int, lease time.Duration, claimID string, locked bool, extra ...any) func(error) {
	ticket := b.floors.begin(queue, time.Now())
	if ticket.probe {
		b.startProbe(queue, ticket.bound)
	}
	args := append([]any{queue, n, micros(lease), claimID, ticket.bound.priority, ticket.bound.runAt, ticket.bound.id}, extra...)
	if query == b.sql.claim {
		args = append(args, locked && ticket.shared, locked)
		if c := ticket.cap; c != nil {
			args = append(args, c.priority, c.runAt, c.id)
		} else {
			args = append(args, nil, nil, nil)
		}
	}
	batch.Queue(query, args...).Query(func(rows pgx.Rows) (err error) {
		*jobs, err = collectJobs(rows)
		return err
	})
	return func(err error) {
		if err != nil {
			b.floors.end(ticket, nil, time.Now())
			return
		}
		b.floors.end(ticket, lastKey(*jobs), time.Now())
	}
}

// lastKey sorts jobs in claim order and returns the last one's key, for
// the claim floor (nil for none).
func lastKey(jobs []*backend.JobRow) *claimKey {
	slices.SortFunc(jobs, backend.ClaimOrder)
	if len(jobs) == 0 {
		return nil
	}
	j := jobs[len(jobs)-1]
	return &claimKey{priority: j.Priority, runAt: j.RunAt, id: j.ID}
}

// claimSQL is the claim statement of Options.Claims.
func (b *Backend) claimSQL() string {
	if b.inPlace {
		return b.sql.claimInPlace
	}
	return b.sql.claim
}

// startProbe looks, off the claim path, for a pending row of queue at or
// below bound that claims above the floor would miss, and lowers the floor
// to it (floor.go). It runs on Listen's connection while one listens
// (onSide): on the pool, a probe while a claim and an outcome write held a
// connection each made the pool open another. Errors only delay the next
// look.
func (b *Backend) startProbe(queue string, bound claimKey) {
	b.probes.Add(1)
	go func() {
		defer b.probes.Done()
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		started := time.Now()
		var found *claimKey
		_ = b.onSide(ctx, func(ctx context.Context, conn sideQuerier) error {
			found = nil
			return queryInTxOn(ctx, conn, "BEGIN READ ONLY", b.claimTx, func(rows pgx.Rows) error {
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
		})
		b.floors.probed(queue, found, time.Since(started), time.Now())
	}()
}

// queryInTx runs query in a transaction of its own with the claim settings, as
// one pipelined round trip: begin ("BEGIN" or "BEGIN READ ONLY"), the
// settings, the query, whose rows read consumes, and COMMIT. What read saw
// counts only once COMMIT has succeeded.
func (b *Backend) queryInTx(ctx context.Context, begin string, read func(pgx.Rows) error, query string, args ...any) error {
	return queryInTxOn(ctx, b.pool, begin, b.claimTx, read, query, args...)
}

// queryInTxOn is queryInTx on conn, with settings as the settings
// statement.
func queryInTxOn(ctx context.Context, conn sideQuerier, begin, settings string, read func(pgx.Rows) error, query string, args ...any) error {
	batch := &pgx.Batch{}
	batch.Queue(begin)
	batch.Queue(settings)
	batch.Queue(query, args...)
	batch.Queue("COMMIT")
	br := conn.SendBatch(ctx, batch)
	err := readInTx(br, read)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	// The released rows keep their keys, below the floor: claim from the
	// head again.
	defer b.floors.resetAll()
	// The claim's lease rows go back into spool_jobs first; then every
	// one of its jobs is released in place.
	if _, err := b.pool.Exec(ctx, b.sql.unleaseClaim, p.ClaimID); err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	rows, err := b.pool.Query(ctx, b.sql.releaseClaim, p.ClaimID)
	if err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	var (
		n      int
		lowest queueKeys
		queue  string
		key    claimKey
	)
	for rows.Next() {
		if err := rows.Scan(&queue, &key.priority, &key.runAt, &key.id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
		}
		n++
		lowest.note(queue, key)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	// Other processes hear of the released jobs as of new ones.
	b.announceDue(ctx, lowest)
	return n, nil
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

// claimSettings steer the claim's plan to the ordered index scans whatever
// the statistics say, and joins of picked ids to nested loops of
// primary-key lookups (the estimate of the two arms' union makes a hash join
// over the whole table look cheaper: 55 ms instead of 9.7 ms per 1,000 jobs
// from 100,000), and turn JIT off: the second arm's LIMIT is an expression,
// estimated at a tenth of the table, so behind a large backlog the claim's
// cost passed jit_above_cost and each claim spent 25-70 ms compiling (bench
// scale, 10,000,000 queued: 1,690 jobs/s). set_config(..., true) lasts until
// the end of the transaction.
const claimSettings = `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
  set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
  set_config('jit', 'off', true)`

// claimPlanSettings, appended to claimSettings (Backend.jobClaimTx), make
// JobClaim's statements (claim.sql, claim_small.sql) run on their cached
// generic plan, with sequential scans off so that the plan, built once per
// connection and again whenever the tables' statistics change, reaches
// spool_jobs and spool_queues through their indexes only, as the custom
// plans did. Left to choose, PostgreSQL planned every claim anew, since
// the generic plan's estimate (LIMIT $2 unknown) never beat the custom
// ones': 0.43 ms of planning against 0.22 ms of execution for a one-job
// claim_small.sql, 0.6-1.0 ms a claim of 500 jobs, where the generic plan
// takes 0.02-0.04 ms, the same plan.
const claimPlanSettings = `, set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`
