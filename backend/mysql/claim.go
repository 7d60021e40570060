package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/claimpick"
	"github.com/spoolq/spool/backend/claimsize"
)

// optimisticRounds bounds the window reads of one optimistic claim: after a
// round that won fewer rows than asked, it reads the head again for the
// rest, so that losing races does not make the caller think the queue ran
// dry.
const optimisticRounds = 8

// JobClaim implements backend.Backend with the strategy chosen at Open. Rows
// come back in claim order.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if p.Max <= 0 {
		return nil, nil
	}
	defer b.metrics.claims.since(time.Now())
	var (
		jobs []*backend.JobRow
		err  error
	)
	if b.strategy == StrategyOptimistic {
		jobs, err = b.claimOptimistic(ctx, p)
	} else {
		jobs, err = b.claimPessimistic(ctx, p)
	}
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", markNoConnectionFree(err))
	}
	slices.SortFunc(jobs, backend.ClaimOrder)
	return jobs, nil
}

// claimPessimistic locks a batch with SELECT … FOR UPDATE SKIP LOCKED and
// claims it by primary key, in one short READ COMMITTED transaction:
// BEGIN, SELECT, UPDATE, COMMIT. The rows it returns are the ones it read
// with the claim's changes applied: nobody else can change a row this
// transaction holds.
//
// A claim expected to be small (the queue's last claim took fewer than
// smallClaimMax jobs: a pickup, not a backlog) first takes up to
// smallClaimMax jobs without the queue's claim lock, and takes the lock
// only when that part comes back full, for the rest of its ask, in the
// same transaction. The lock exists for a backlog's claims, which would
// otherwise step over the hundreds of rows each other's claims hold; a
// pickup's claim steps over a few rows at most, and waiting for the lock
// would make it wait for every claim ahead of it, each holding the lock
// over its round trips and its durable commit.
func (b *Backend) claimPessimistic(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	small := b.claimLock && b.small.Small(p.Queue)
	if small {
		// A claim of listed jobs takes them by id without waiting for
		// the queue's turn: another claim of this process cannot take
		// the same ids (each list is handed out once), and a head claim
		// out, whose rows it may meet, is skipped like any other
		// transaction's (claimListedNoWait). Behind the turn, it waited
		// for the head claim out, whose walk over the claim index's
		// unpurged entries took 15-55 ms after a drain.
		ids, skip := b.listed.forClaim(p.Queue, min(p.Max, smallClaimMax), false)
		if skip {
			b.claimsListedTaken.Add(1)
			return nil, nil
		}
		if ids != nil {
			return b.claimListedTx(ctx, p, ids)
		}
		// This process's small head claims of a queue still take turns,
		// here rather than on the server: a claim sent while another was
		// out (a wake-up that arrived meanwhile) then reads after that
		// one's commit, and finds the jobs committed since rather than
		// nothing, the rows the first holds being skipped.
		release, err := b.small.turn(ctx, p.Queue)
		if err != nil {
			return nil, err
		}
		defer release()
		// A claim that waited for its turn may find jobs listed
		// meanwhile: it takes those by id like any other (listed.go).
		ids, skip = b.listed.forClaim(p.Queue, min(p.Max, smallClaimMax), true)
		if skip {
			b.claimsListedTaken.Add(1)
			return nil, nil
		}
		if ids != nil {
			return b.claimListedTx(ctx, p, ids)
		}
		if b.small.wasEmpty(p.Queue) {
			// The last claim found nothing: most likely a poll of an
			// idle queue, so a plain read first, one round trip where
			// the claim's transaction takes three (BEGIN, SELECT,
			// COMMIT). With 8 idle processes, each one's polls were
			// half of its statements.
			var due bool
			if err := b.db.QueryRowContext(ctx, b.sql.claimDue, p.Queue).Scan(&due); err != nil {
				return nil, err
			}
			if !due {
				b.claimsProbedEmpty.Add(1)
				return nil, nil
			}
		}
	}
	// asked is what the claim asked for, with what it took on under the
	// lock: a claim that took all of it says nothing of the backlog.
	asked := p.Max
	if more := p.More; more != nil {
		q := *p
		q.More = func() int {
			n := more()
			asked = q.Max + n
			return n
		}
		p = &q
	}
	if !small {
		b.listed.headBegins(p.Queue)
	}
	var jobs []*backend.JobRow
	upTo := b.listed.maxListed(p.Queue)
	err := b.inTx(ctx, func(tx *sql.Tx) (err error) {
		if !small {
			jobs, err = b.claimIn(ctx, tx, p)
			return err
		}
		n := min(p.Max, smallClaimMax)
		if jobs, err = b.claimRows(ctx, tx, p, n); err != nil || len(jobs) < n || n == p.Max {
			return err
		}
		// Full: a backlog may have come; the rest under the lock. The
		// rows claimed above are running now, so the second read does
		// not return them again.
		rest, err := b.claimIn(ctx, tx, &backend.JobClaimParams{Queue: p.Queue, Max: p.Max - n, Lease: p.Lease, ClaimID: p.ClaimID, More: p.More})
		jobs = append(jobs, rest...)
		return err
	})
	if err == nil && b.claimLock {
		took := len(jobs)
		if took < asked {
			// Short: the claim took every due job no other claim held,
			// so the backlog, if any, is gone, and the queue's next claim
			// is a pickup's however many this one took. Expected large,
			// the first claims of 8 processes after a drain queued for
			// the claim lock behind each other's walks of the index's
			// unpurged head, 150-270 ms before their SELECTs.
			took = 0
		}
		b.small.Claimed(p.Queue, took, asked)
		b.small.setEmpty(p.Queue, len(jobs) == 0)
	}
	if err == nil {
		b.listed.headDone(p.Queue, upTo, jobs, asked)
		b.listed.took(p.Queue, jobs)
	}
	return jobs, err
}

// claimListedTx is a small claim of the listed jobs ids of p's queue
// (listed.go): on MariaDB first without a transaction (claimListedNoWait),
// and in a transaction of its own when that met a row another holds.
func (b *Backend) claimListedTx(ctx context.Context, p *backend.JobClaimParams, ids []int64) ([]*backend.JobRow, error) {
	b.claimsListed.Add(1)
	var (
		jobs []*backend.JobRow
		done bool
		err  error
	)
	if b.server.mariaDB && !b.server.galera {
		jobs, done, err = b.claimListedNoWait(ctx, p, ids)
	}
	if err == nil && !done {
		if b.server.mariaDB && !b.server.galera {
			b.claimsListedLocked.Add(1)
		}
		err = b.inTx(ctx, func(tx *sql.Tx) (err error) {
			jobs, err = b.claimListed(ctx, tx, p, ids)
			return err
		})
	}
	if err == nil {
		b.listed.took(p.Queue, jobs)
		b.small.Claimed(p.Queue, len(jobs), p.Max)
		b.small.setEmpty(p.Queue, len(jobs) == 0)
		if len(jobs) < p.Max && b.listed.left(p.Queue) {
			// The claim took part of the list (forClaim), and came
			// back short, which may end the producer's claims: the
			// rest waits for no look.
			b.listed.wake(p.Queue)
		}
	}
	return jobs, err
}

// claimIn is the pessimistic claim's SELECT and UPDATE in transaction tx,
// after the queue's claim lock unless Options.ClaimLock is off: the claims
// of a queue then take their rows one at a time, and none steps over the
// rows another holds (SKIP LOCKED checks every one against InnoDB's lock
// table), which made the server's CPU per job grow with the number of
// processes claiming.
//
// Holding the lock, the claim also takes the room its caller made while
// it waited (JobClaimParams.More): with several processes draining a
// backlog each claim waits for the others', and one sized only when it
// was sent would leave that room to another claim. A claim costs the
// server more than its rows (a transaction, a durable commit, a read of
// the queue's head), so fewer and larger claims cost it less a job.
func (b *Backend) claimIn(ctx context.Context, tx *sql.Tx, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	n := p.Max
	if b.claimLock {
		if _, err := tx.ExecContext(ctx, b.sql.claimLock, p.Queue); err != nil {
			return nil, err
		}
		if p.More != nil {
			n += max(0, p.More())
		}
	}
	return b.claimRows(ctx, tx, p, n)
}

// claimRows locks up to n due pending rows of p's queue in transaction tx
// and claims them, without the claim lock.
func (b *Backend) claimRows(ctx context.Context, tx *sql.Tx, p *backend.JobClaimParams, n int) ([]*backend.JobRow, error) {
	rows, err := tx.QueryContext(ctx, b.sql.claimSelect+"\nLIMIT "+strconv.Itoa(n)+" FOR UPDATE SKIP LOCKED", p.Queue, p.Queue)
	if err != nil {
		return nil, err
	}
	return b.claimLocked(ctx, tx, p, rows)
}

// claimLocked claims, in transaction tx, the rows a claim's SELECT … FOR
// UPDATE returns, and returns them with the claim applied.
func (b *Backend) claimLocked(ctx context.Context, tx *sql.Tx, p *backend.JobClaimParams, rows *sql.Rows) ([]*backend.JobRow, error) {
	jobs, now, err := collectClaimed(rows, p.Queue)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	at := sqlTime(now)
	res, err := tx.ExecContext(ctx, b.sql.claimUpdate+inList(ids), at, micros(p.Lease), leaseHolder(p.ClaimID), at)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
		return nil, fmt.Errorf("claimed %d of %d locked rows (%v)", n, len(ids), err)
	}
	markClaimed(jobs, now, p)
	return jobs, nil
}

// smallClaimMax is the most jobs a claim expected to be small takes
// without the queue's claim lock (claimPessimistic).
const smallClaimMax = 64

// smallClaims is what a MariaDB backend knows of its queues' small claims:
// which queues' next claims are expected small, and each queue's turn
// among this process's small claims.
type smallClaims struct {
	claimsize.Expect
	turns sync.Map // queue name → chan struct{} of capacity 1: the turn
	// empty holds the queues whose last pessimistic claim in this
	// process came back empty: their next small claim probes first.
	empty sync.Map // queue name → struct{}
	// onWait, when set (tests), is called as a claim begins to wait for
	// its queue's turn.
	onWait func(queue string)
}

// wasEmpty reports whether the queue's last claim came back empty.
func (s *smallClaims) wasEmpty(queue string) bool {
	_, ok := s.empty.Load(queue)
	return ok
}

// setEmpty records whether the queue's last claim came back empty.
func (s *smallClaims) setEmpty(queue string, empty bool) {
	if empty {
		if _, ok := s.empty.Load(queue); !ok {
			s.empty.Store(queue, struct{}{})
		}
	} else if _, ok := s.empty.Load(queue); ok {
		s.empty.Delete(queue)
	}
}

// turn waits for the queue's turn among this process's small claims, and
// returns the function that ends it.
func (s *smallClaims) turn(ctx context.Context, queue string) (release func(), err error) {
	v, ok := s.turns.Load(queue)
	if !ok {
		v, _ = s.turns.LoadOrStore(queue, make(chan struct{}, 1))
	}
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	default:
	}
	if s.onWait != nil {
		s.onWait(queue)
	}
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// holderWidth is the stored width of leased_by (schema 16): a row holds
// that many spaces until its first claim, and a claim id padded to it, so
// that a claim overwrites a value of the same length and InnoDB rewrites
// the row in place. A longer id is stored as it is (its claim grows the
// row). The column's collation pads with spaces when it compares, so
// "leased_by = id" matches the padded value; scanJob trims it.
const holderWidth = 64

// leaseHolder is a claim id as leased_by stores it: padded with spaces to
// holderWidth bytes.
func leaseHolder(claimID string) string {
	if len(claimID) >= holderWidth {
		return claimID
	}
	return claimID + strings.Repeat(" ", holderWidth-len(claimID))
}

// markClaimed applies a claim's changes to rows as read before the claim.
// The rows share their lease end and attempt time, which no reader
// changes in place.
func markClaimed(jobs []*backend.JobRow, now time.Time, p *backend.JobClaimParams) {
	if len(jobs) == 0 {
		return
	}
	until := now.Add(time.Duration(micros(p.Lease)) * time.Microsecond)
	at := now
	for _, j := range jobs {
		j.State = backend.StateRunning
		j.Attempt++
		j.Fence++
		j.LeasedUntil = &until
		j.LeasedBy = p.ClaimID
		j.AttemptedAt = &at
	}
}

// claimOptimistic reads the queue's head (Max + ClaimWindow rows) without
// locks, picks Max of them at random, and claims them with one UPDATE that
// applies only to rows whose fence (their version) and pending state are as
// read. The affected-rows count says how many it won; only when that falls
// short does a query ask which. Rounds repeat, up to optimisticRounds, until
// it holds Max rows or the head holds no more candidates. No transaction
// spans the read and the write, and no lock is held between them.
func (b *Backend) claimOptimistic(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	var won []*backend.JobRow
	for round := 0; round < optimisticRounds && len(won) < p.Max; round++ {
		want := p.Max - len(won)
		heads, now, err := b.readWindow(ctx, p.Queue, want+b.window)
		if err != nil {
			return won, err
		}
		if len(heads) == 0 {
			break
		}
		picked := claimpick.Pick(heads, want, func(r *backend.JobRow) int16 { return r.Priority })
		got, err := b.claimPicked(ctx, picked, now, p)
		if err != nil {
			return won, err
		}
		won = append(won, got...)
		if lost := len(picked) - len(got); lost > 0 {
			b.metrics.conflicts.Add(uint64(lost))
		} else if len(heads) < want+b.window {
			break // won everything picked, and the head had no more to offer
		}
	}
	return won, nil
}

// readWindow reads up to n due pending rows of a queue in claim order,
// without locks, and the database's now.
func (b *Backend) readWindow(ctx context.Context, queue string, n int) ([]*backend.JobRow, time.Time, error) {
	b.metrics.rounds.Add(1)
	var (
		heads []*backend.JobRow
		now   time.Time
	)
	err := b.retry(ctx, func() error {
		rows, err := b.db.QueryContext(ctx, b.sql.window+"\nLIMIT "+strconv.Itoa(n), queue, queue)
		if err != nil {
			return err
		}
		heads, now, err = collectClaimed(rows, queue)
		return err
	})
	return heads, now, err
}

// claimPicked claims the picked rows where their fence still holds, and
// returns those it won with the claim applied.
func (b *Backend) claimPicked(ctx context.Context, picked []*backend.JobRow, now time.Time, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	slices.SortFunc(picked, func(a, b *backend.JobRow) int { return claimOrderByID(a, b) })
	ids := make([]int64, len(picked))
	fences := make([]int32, len(picked))
	for i, j := range picked {
		ids[i], fences[i] = j.ID, j.Fence
	}
	at := sqlTime(now)
	var n int64
	err := b.retry(ctx, func() error {
		res, err := b.db.ExecContext(ctx, b.sql.optimisticUpdate+inList(ids)+leaseGuard(ids, fences),
			at, micros(p.Lease), leaseHolder(p.ClaimID), at)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return nil, err
	}
	return b.claimWinners(ctx, p, picked, ids, n, now)
}

// claimWinners returns the rows of picked (ids their ids) that a claim's
// UPDATE, which changed n rows, took, with the claim applied.
func (b *Backend) claimWinners(ctx context.Context, p *backend.JobClaimParams, picked []*backend.JobRow, ids []int64, n int64, now time.Time) ([]*backend.JobRow, error) {
	winners := picked
	if int(n) < len(picked) {
		// Some rows went to another claimer: ask which are ours. The claim
		// id is unique to this call, so leased_by names them.
		mine, err := b.claimedIDs(ctx, p.ClaimID, ids)
		if err != nil {
			return nil, err
		}
		winners = winners[:0:0]
		for _, j := range picked {
			if mine[j.ID] {
				winners = append(winners, j)
			}
		}
	}
	markClaimed(winners, now, p)
	return winners, nil
}

// claimOrderByID orders rows by id, the order InnoDB locks an IN list in.
func claimOrderByID(a, b *backend.JobRow) int {
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// claimedIDs returns which of ids are running under claimID.
func (b *Backend) claimedIDs(ctx context.Context, claimID string, ids []int64) (map[int64]bool, error) {
	mine := make(map[int64]bool, len(ids))
	err := b.retry(ctx, func() error {
		clear(mine)
		rows, err := b.db.QueryContext(ctx, b.sql.optimisticWon+inList(ids), claimID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			mine[id] = true
		}
		return rows.Err()
	})
	return mine, err
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	var n int64
	err := b.retry(ctx, func() error {
		res, err := b.db.ExecContext(ctx, b.sql.releaseClaim, p.ClaimID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	return int(n), nil
}
