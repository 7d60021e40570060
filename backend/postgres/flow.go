package postgres

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spoolq/spool/backend"
)

// JobClaimFlow implements backend.Backend: one transaction, with the claim's
// plan settings, that first takes the queue's flow lock (a transaction-scoped
// advisory lock, so it needs no session state and works behind a
// transaction pooler). The begin, the settings, the listing of keys the
// claim will ask for (read before the lock, so the lock is not held for
// it), the lock and the reads of FlowRunning go in one round trip: the
// lock is held from then on, so what FlowRunning read is what the claim
// decides on. A striped quick claim (backend.FlowQuick.Stripes) holds the
// queue's lock shared and one stripe of it exclusively, a random one, so
// that claims of several processes run side by side while the limits are
// far; every other claim holds the whole lock.
func (b *Backend) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	// A connection released inside a transaction (an error below) is
	// closed by the pool, not reused.
	defer conn.Release()
	f := &flowTx{b: b, conn: conn, p: p, running: &backend.FlowRunning{Live: map[string]int{}, All: map[string]int{}}}
	r := f.running
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue(b.claimTx)
	if p.KeysLimit > 0 && p.Quick == nil {
		// (A quick claim lists no keys; when it declines, the claim that
		// follows is not quick.)
		f.listed = &listedKeys{after: p.KeysAfter, limit: p.KeysLimit}
		batch.Queue(b.sql.flow.keys, p.Queue, p.KeysAfter, p.KeysLimit).Query(func(rows pgx.Rows) (err error) {
			f.listed.keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	}
	striped := p.Quick != nil && p.Quick.Stripes > 0
	if striped {
		batch.Queue(b.sql.flow.lockShared, p.Queue)
		batch.Queue(b.sql.flow.lockStripe, p.Queue, rand.IntN(p.Quick.Stripes))
	} else {
		batch.Queue(b.sql.flow.lock, p.Queue)
	}
	batch.Queue(b.sql.flow.state, p.Queue).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.Now, &r.Paused)
	})
	switch q := p.Quick; {
	case q != nil && (q.KeyLimit == 0 || q.Stripes > 0):
		// The quick claim counts what it needs itself (and, striped,
		// one that takes nothing is claimed again with the whole lock).
	case p.CountAll:
		batch.Queue(b.sql.flow.running, p.Queue).Query(func(rows pgx.Rows) error {
			var (
				key       string
				live, all int
			)
			_, err := pgx.ForEachRow(rows, []any{&key, &live, &all}, func() error {
				r.Live[key], r.All[key] = live, all
				return nil
			})
			return err
		})
	default:
		batch.Queue(b.sql.flow.live, p.Queue).Query(func(rows pgx.Rows) error {
			var (
				key  string
				live int
			)
			_, err := pgx.ForEachRow(rows, []any{&key, &live}, func() error {
				r.Live[key] = live
				return nil
			})
			return err
		})
	}
	floored := func(error) {}
	if q := p.Quick; q != nil {
		// The whole claim, with the claim floor, and its commit.
		r.Quick = &backend.FlowQuickResult{Striped: striped}
		floored = b.queueFloored(batch, &r.Quick.Jobs, b.sql.flow.quick, p.Queue, q.Want, p.Lease, p.ClaimID, false, q.Extra, q.Limit, q.KeyLimit, q.Stripes)
		batch.Queue("COMMIT")
		f.committed = true
	}
	err = conn.SendBatch(ctx, batch).Close()
	floored(err)
	if err != nil {
		return fmt.Errorf("claim jobs: take the flow lock: %w", err)
	}
	r.Now = r.Now.UTC()
	if err := claim(f); err != nil {
		if !f.committed {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return fmt.Errorf("claim jobs: %w", err)
	}
	if f.committed {
		return nil
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	return nil
}

// flowTx is a flow claim's transaction, on one connection.
type flowTx struct {
	b       *Backend
	conn    *pgxpool.Conn
	p       *backend.JobClaimFlowParams
	running *backend.FlowRunning // read with the lock
	listed  *listedKeys          // read ahead, before the lock
	// committed is set once a final take sent COMMIT with it.
	committed bool
}

// listedKeys is a FlowKeys listing read ahead.
type listedKeys struct {
	after string
	limit int
	keys  []string
}

// FlowRunning returns what the transaction read when it took the lock.
func (f *flowTx) FlowRunning(ctx context.Context) (*backend.FlowRunning, error) {
	return f.running, nil
}

func (f *flowTx) FlowKeys(ctx context.Context, after string, limit int) ([]string, error) {
	if l := f.listed; l != nil && l.after == after && l.limit == limit {
		f.listed = nil
		return l.keys, nil
	}
	rows, err := f.conn.Query(ctx, f.b.sql.flow.keys, f.p.Queue, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list flow keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list flow keys: %w", err)
	}
	return keys, nil
}

func (f *flowTx) FlowRates(ctx context.Context, keys []string) (map[string]time.Time, error) {
	rows, err := f.conn.Query(ctx, f.b.sql.flow.rates, f.p.Queue, keys)
	if err != nil {
		return nil, fmt.Errorf("read rate states: %w", err)
	}
	out := map[string]time.Time{}
	var (
		key string
		tat time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&key, &tat}, func() error {
		out[key] = tat.UTC()
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read rate states: %w", err)
	}
	return out, nil
}

func (f *flowTx) FlowSaveRates(ctx context.Context, tats map[string]time.Time) error {
	keys := make([]string, 0, len(tats))
	times := make([]time.Time, 0, len(tats))
	for _, k := range slices.Sorted(maps.Keys(tats)) {
		keys, times = append(keys, k), append(times, tats[k])
	}
	if _, err := f.conn.Exec(ctx, f.b.sql.flow.saveRates, f.p.Queue, keys, times); err != nil {
		return fmt.Errorf("save rate states: %w", err)
	}
	return nil
}

// FlowTake sends every take in one round trip.
//
// A take of any key is JobClaim's own statement, from the claim floor
// (floor.go): without the floor every claim would walk the index entries of
// the jobs claimed since VACUUM last ran, from the head of the queue. The
// floor moves once the round trip is back; the controller makes such a
// take final, so its commit came with it.
func (f *flowTx) FlowTake(ctx context.Context, takes []backend.FlowTake, final bool) ([]*backend.JobRow, error) {
	q := &f.b.sql.flow
	lease := micros(f.p.Lease)
	batch := &pgx.Batch{}
	var jobs []*backend.JobRow
	collect := func(rows pgx.Rows) error {
		got, err := collectJobs(rows)
		jobs = append(jobs, got...)
		return err
	}
	// Keys' takes go in one statement per order, over arrays.
	type keyTakes struct {
		keys  []string
		maxes []int32
	}
	byOrder := map[backend.FlowOrder]*keyTakes{}
	floored := []func(error){}
	for _, t := range takes {
		switch {
		case t.Any:
			var got []*backend.JobRow
			done := f.b.queueFloored(batch, &got, f.b.claimSQL(), f.p.Queue, t.Max, f.p.Lease, f.p.ClaimID, false)
			floored = append(floored, func(err error) {
				jobs = append(jobs, got...)
				done(err)
			})
		case t.Key == "":
			batch.Queue(q.takeKeyless, f.p.Queue, t.Max, lease, f.p.ClaimID, t.Window).Query(collect)
		default:
			a := byOrder[t.Order]
			if a == nil {
				a = &keyTakes{}
				byOrder[t.Order] = a
			}
			a.keys, a.maxes = append(a.keys, t.Key), append(a.maxes, int32(t.Max))
		}
	}
	for order, a := range byOrder {
		query := q.takeKey
		switch order {
		case backend.FlowOrderBlock:
			query = q.takeBlock
		case backend.FlowOrderStepAside:
			query = q.takeStep
		}
		batch.Queue(query, f.p.Queue, a.maxes, lease, f.p.ClaimID, a.keys).Query(collect)
	}
	if final {
		// The lock is released with the takes' round trip.
		batch.Queue("COMMIT")
		f.committed = true
	}
	err := f.conn.SendBatch(ctx, batch).Close()
	for _, done := range floored {
		done(err)
	}
	if err != nil {
		return nil, fmt.Errorf("take jobs: %w", err)
	}
	slices.SortFunc(jobs, backend.ClaimOrder)
	return jobs, nil
}

// QueueFlowUse implements backend.Backend.
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	use := backend.FlowUses{}
	batch := &pgx.Batch{}
	batch.Queue(b.sql.flow.use, p.Queue).Query(func(rows pgx.Rows) error {
		var (
			key              string
			running, pending int
		)
		_, err := pgx.ForEachRow(rows, []any{&key, &running, &pending}, func() error {
			use.Add(key, running, pending)
			return nil
		})
		return err
	})
	batch.Queue(b.sql.flow.useRates, p.Queue).Query(func(rows pgx.Rows) error {
		var (
			key string
			tat time.Time
		)
		_, err := pgx.ForEachRow(rows, []any{&key, &tat}, func() error {
			use.SetRate(key, tat.UTC())
			return nil
		})
		return err
	})
	if err := b.pool.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("queue flow use: %w", err)
	}
	return use.Sorted(p.Limit), nil
}
