package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// JobClaimFlow implements backend.Backend: one READ COMMITTED transaction
// that first writes the queue's flow lock row (flow_lock.sql) and reads the
// database's clock once, for every time the claim decides on and writes.
// A quick claim (backend.FlowQuick) is decided here, in its own
// transaction, before the claim function runs. Lock conflicts retry the
// whole transaction, claim function included.
func (b *Backend) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	if p.Quick != nil {
		var run *backend.FlowRunning
		err := b.inTx(ctx, func(tx *sql.Tx) (err error) {
			run, err = b.claimQuick(ctx, tx, p)
			return err
		})
		if err == nil {
			err = claim(&flowTx{b: b, p: p, decided: run})
		}
		if err != nil {
			return fmt.Errorf("claim jobs: %w", markNoConnectionFree(err))
		}
		return nil
	}
	err := b.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, b.sql.flowLock, p.Queue); err != nil {
			return fmt.Errorf("take the flow lock: %w", err)
		}
		return claim(&flowTx{b: b, tx: tx, p: p})
	})
	if err != nil {
		return fmt.Errorf("claim jobs: %w", markNoConnectionFree(err))
	}
	return nil
}

// claimQuick decides a quick claim (backend.FlowQuick) in tx and takes its
// jobs. Offered stripes, it holds the flow lock row shared and a random
// stripe row exclusively, so such claims of several processes overlap;
// otherwise, or when the lock row does not exist yet, it writes the lock
// row as every other flow claim does.
func (b *Backend) claimQuick(ctx context.Context, tx *sql.Tx, p *backend.JobClaimFlowParams) (*backend.FlowRunning, error) {
	q := p.Quick
	striped := false
	if q.Stripes > 0 {
		var one int
		switch err := tx.QueryRowContext(ctx, b.sql.flowLockShared, p.Queue).Scan(&one); err {
		case nil:
			if _, err := tx.ExecContext(ctx, b.sql.flowLockStripe, p.Queue, rand.IntN(q.Stripes)); err != nil {
				return nil, fmt.Errorf("take a stripe of the flow lock: %w", err)
			}
			striped = true
		case sql.ErrNoRows:
		default:
			return nil, fmt.Errorf("take the flow lock shared: %w", err)
		}
	}
	if !striped {
		if _, err := tx.ExecContext(ctx, b.sql.flowLock, p.Queue); err != nil {
			return nil, fmt.Errorf("take the flow lock: %w", err)
		}
	}
	f := &flowTx{b: b, tx: tx, p: p}
	run, err := f.FlowRunning(ctx)
	if err != nil {
		return nil, err
	}
	run.Quick = &backend.FlowQuickResult{Striped: striped}
	if run.Paused {
		return run, nil
	}
	live, busiest := 0, 0
	for _, n := range run.Live {
		live, busiest = live+n, max(busiest, n)
	}
	if n := q.Allowed(live, busiest, striped); n > 0 {
		cp := &backend.JobClaimParams{Queue: p.Queue, Max: n, Lease: p.Lease, ClaimID: p.ClaimID}
		if run.Quick.Jobs, err = b.claimIn(ctx, tx, cp); err != nil {
			return nil, fmt.Errorf("take jobs: %w", err)
		}
		slices.SortFunc(run.Quick.Jobs, backend.ClaimOrder)
	}
	return run, nil
}

// flowTx is a flow claim's transaction.
type flowTx struct {
	b   *Backend
	tx  *sql.Tx
	p   *backend.JobClaimFlowParams
	now time.Time // the database's, read by FlowRunning
	// decided is a quick claim's outcome, already committed: FlowRunning
	// returns it, and nothing else is called.
	decided *backend.FlowRunning
}

func (f *flowTx) FlowRunning(ctx context.Context) (*backend.FlowRunning, error) {
	if f.decided != nil {
		return f.decided, nil
	}
	r := &backend.FlowRunning{Live: map[string]int{}, All: map[string]int{}}
	rows, err := f.tx.QueryContext(ctx, f.b.sql.flowRunning, f.p.Queue, f.p.Queue)
	if err != nil {
		return nil, fmt.Errorf("read running jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key       sql.NullString
			live, all int
		)
		if err := rows.Scan(&r.Now, &r.Paused, &key, &live, &all); err != nil {
			return nil, fmt.Errorf("read running jobs: %w", err)
		}
		if key.Valid {
			r.Live[key.String], r.All[key.String] = live, all
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read running jobs: %w", err)
	}
	f.now = r.Now
	return r, nil
}

func (f *flowTx) FlowKeys(ctx context.Context, after string, limit int) ([]string, error) {
	var keys []string
	for len(keys) < limit {
		var k string
		err := f.tx.QueryRowContext(ctx, f.b.sql.flowKeyNext, f.p.Queue, after).Scan(&k)
		if err == sql.ErrNoRows {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list flow keys: %w", err)
		}
		keys, after = append(keys, k), k
	}
	return keys, nil
}

func (f *flowTx) FlowRates(ctx context.Context, keys []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(keys) == 0 {
		return out, nil
	}
	args := []any{f.p.Queue}
	marks := make([]string, len(keys))
	for i, k := range keys {
		marks[i] = "?"
		args = append(args, k)
	}
	rows, err := f.tx.QueryContext(ctx, f.b.sql.flowRates+"("+strings.Join(marks, ",")+")", args...)
	if err != nil {
		return nil, fmt.Errorf("read rate states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k   string
			tat time.Time
		)
		if err := rows.Scan(&k, &tat); err != nil {
			return nil, fmt.Errorf("read rate states: %w", err)
		}
		out[k] = tat
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read rate states: %w", err)
	}
	return out, nil
}

func (f *flowTx) FlowSaveRates(ctx context.Context, tats map[string]time.Time) error {
	for k, t := range tats {
		if _, err := f.tx.ExecContext(ctx, f.b.sql.flowSaveRate, f.p.Queue, k, sqlTime(t)); err != nil {
			return fmt.Errorf("save rate state: %w", err)
		}
	}
	return nil
}

// FlowTake takes jobs without a key, or of any key, with a statement each,
// and the keys' takes of each order with one UNION ALL of locking reads.
func (f *flowTx) FlowTake(ctx context.Context, takes []backend.FlowTake, final bool) ([]*backend.JobRow, error) {
	q := &f.b.sql
	now := sqlTime(f.now)
	var picked []*backend.JobRow
	read := func(query string, args ...any) error {
		rows, err := f.tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		got, err := collectJobs(rows)
		if err != nil {
			return err
		}
		for _, j := range got {
			if !j.RunAt.After(f.now) { // a block take's head may not be due
				picked = append(picked, j)
			}
		}
		return nil
	}
	type union struct {
		parts []string
		args  []any
	}
	byOrder := map[backend.FlowOrder]*union{}
	for _, t := range takes {
		lock := "\nLIMIT " + strconv.Itoa(t.Max) + " FOR UPDATE SKIP LOCKED"
		var err error
		switch {
		case t.Any:
			err = read(q.flowTakeAny+lock, f.p.Queue, now)
		case t.Key == "":
			var ids []int64
			if ids, err = f.keylessHead(ctx, t.Window); err == nil && len(ids) > 0 {
				err = read(q.flowTakeIDs + inList(ids) + "\nORDER BY priority, run_at, id" + lock)
			}
		default:
			u := byOrder[t.Order]
			if u == nil {
				u = &union{}
				byOrder[t.Order] = u
			}
			switch t.Order {
			case backend.FlowOrderBlock:
				u.parts, u.args = append(u.parts, "("+q.flowTakeBlock+")"), append(u.args, f.p.Queue, t.Key)
			case backend.FlowOrderStepAside:
				u.parts, u.args = append(u.parts, "("+q.flowTakeStep+")"), append(u.args, f.p.Queue, t.Key, now)
			default:
				u.parts, u.args = append(u.parts, "("+q.flowTakeKey+lock+")"), append(u.args, f.p.Queue, t.Key, now)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("take jobs: %w", err)
		}
	}
	for _, u := range byOrder {
		if err := read(strings.Join(u.parts, "\nUNION ALL\n"), u.args...); err != nil {
			return nil, fmt.Errorf("take jobs: %w", err)
		}
	}
	if len(picked) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(picked))
	for i, j := range picked {
		ids[i] = j.ID
	}
	res, err := f.tx.ExecContext(ctx, q.claimUpdate+inList(ids), now, micros(f.p.Lease), f.p.ClaimID, now)
	if err != nil {
		return nil, fmt.Errorf("take jobs: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
		return nil, fmt.Errorf("take jobs: claimed %d of %d locked rows (%v)", n, len(ids), err)
	}
	cp := &backend.JobClaimParams{Queue: f.p.Queue, Lease: f.p.Lease, ClaimID: f.p.ClaimID}
	markClaimed(picked, f.now, cp)
	slices.SortFunc(picked, backend.ClaimOrder)
	return picked, nil
}

// keylessHead returns the ids of jobs without a key among the first window
// due pending jobs of the queue.
func (f *flowTx) keylessHead(ctx context.Context, window int) ([]int64, error) {
	rows, err := f.tx.QueryContext(ctx, f.b.sql.flowHead+"\nLIMIT "+strconv.Itoa(window), f.p.Queue, sqlTime(f.now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var (
			id      int64
			keyless bool
		)
		if err := rows.Scan(&id, &keyless); err != nil {
			return nil, err
		}
		if keyless {
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

// QueueFlowUse implements backend.Backend.
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	use := backend.FlowUses{}
	err := sqlfilter.ReadRows(ctx, b.db, func(rows *sql.Rows) error {
		var (
			key              string
			running, pending int
		)
		err := rows.Scan(&key, &running, &pending)
		use.Add(key, running, pending)
		return err
	}, b.sql.flowUse, p.Queue, p.Queue, p.Queue, p.Queue)
	if err == nil {
		err = sqlfilter.ReadRows(ctx, b.db, func(rows *sql.Rows) error {
			var (
				key string
				tat time.Time
			)
			err := rows.Scan(&key, &tat)
			use.SetRate(key, tat)
			return err
		}, b.sql.flowUseRates, p.Queue)
	}
	if err != nil {
		return nil, fmt.Errorf("queue flow use: %w", err)
	}
	return use.Sorted(p.Limit), nil
}
