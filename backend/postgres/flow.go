package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// JobClaimFlow implements backend.Backend: one transaction, with the claim's
// plan settings, that first takes the queue's flow lock (a transaction-scoped
// advisory lock, so it needs no session state and works behind a
// transaction pooler).
func (b *Backend) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	batch := &pgx.Batch{}
	batch.Queue(claimSettings)
	batch.Queue(b.sql.flow.lock, p.Queue)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("claim jobs: take the flow lock: %w", err)
	}
	if err := claim(&flowTx{b: b, tx: tx, p: p}); err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	return nil
}

// flowTx is a flow claim's transaction.
type flowTx struct {
	b  *Backend
	tx pgx.Tx
	p  *backend.JobClaimFlowParams
}

func (f *flowTx) FlowRunning(ctx context.Context) (*backend.FlowRunning, error) {
	r := &backend.FlowRunning{Live: map[string]int{}, All: map[string]int{}}
	batch := &pgx.Batch{}
	batch.Queue(f.b.sql.flow.state, f.p.Queue).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.Now, &r.Paused)
	})
	batch.Queue(f.b.sql.flow.running, f.p.Queue).Query(func(rows pgx.Rows) error {
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
	if err := f.tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("read running jobs: %w", err)
	}
	r.Now = r.Now.UTC()
	return r, nil
}

func (f *flowTx) FlowKeys(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := f.tx.Query(ctx, f.b.sql.flow.keys, f.p.Queue, after, limit)
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
	rows, err := f.tx.Query(ctx, f.b.sql.flow.rates, f.p.Queue, keys)
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
	if _, err := f.tx.Exec(ctx, f.b.sql.flow.saveRates, f.p.Queue, keys, times); err != nil {
		return fmt.Errorf("save rate states: %w", err)
	}
	return nil
}

// FlowTake sends every take in one round trip.
func (f *flowTx) FlowTake(ctx context.Context, takes []backend.FlowTake) ([]*backend.JobRow, error) {
	q := &f.b.sql.flow
	lease := micros(f.p.Lease)
	batch := &pgx.Batch{}
	var jobs []*backend.JobRow
	collect := func(rows pgx.Rows) error {
		got, err := collectJobs(rows)
		jobs = append(jobs, got...)
		return err
	}
	for _, t := range takes {
		args := []any{f.p.Queue, t.Max, lease, f.p.ClaimID}
		var query string
		switch {
		case t.Any:
			query = q.takeAny
		case t.Key == "":
			query, args = q.takeKeyless, append(args, t.Window)
		case t.Order == backend.FlowOrderBlock:
			query, args = q.takeBlock, append(args, t.Key)
		case t.Order == backend.FlowOrderStepAside:
			query, args = q.takeStep, append(args, t.Key)
		default:
			query, args = q.takeKey, append(args, t.Key)
		}
		batch.Queue(query, args...).Query(collect)
	}
	if err := f.tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("take jobs: %w", err)
	}
	slices.SortFunc(jobs, claimOrder)
	return jobs, nil
}

// claimOrder orders jobs as claims take them: priority, run time, id.
func claimOrder(a, b *backend.JobRow) int {
	if a.Priority != b.Priority {
		return int(a.Priority) - int(b.Priority)
	}
	if c := a.RunAt.Compare(b.RunAt); c != 0 {
		return c
	}
	return int(a.ID - b.ID)
}

// QueueFlowUse implements backend.Backend.
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	use := map[string]*backend.FlowKeyUse{}
	batch := &pgx.Batch{}
	batch.Queue(b.sql.flow.use, p.Queue).Query(func(rows pgx.Rows) error {
		var (
			key              string
			running, pending int
		)
		_, err := pgx.ForEachRow(rows, []any{&key, &running, &pending}, func() error {
			use[key] = &backend.FlowKeyUse{Key: key, Running: running, Pending: pending}
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
			u, ok := use[key]
			if !ok {
				u = &backend.FlowKeyUse{Key: key}
				use[key] = u
			}
			at := tat.UTC()
			u.RateTAT = &at
			return nil
		})
		return err
	})
	if err := b.pool.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("queue flow use: %w", err)
	}
	return backend.SortFlowUse(use, p.Limit), nil
}
