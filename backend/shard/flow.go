package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobClaimFlow runs a flow-controlled claim on the queue's shard under
// ByQueue, where every rule holds as on one store; when it takes nothing
// there and the queue's strays are due (JobClaim), the other shards are
// tried in turn. Under ByKey it runs on one shard at a time, starting one
// further at each call, and moves on to the next only when the claim took
// nothing there: a key's rules (limits, rates, order) hold, since a key
// lives on one shard, while a queue-wide limit holds on each shard
// separately.
func (b *Backend) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	home := b.QueueShard(p.Queue)
	order := b.all
	if home >= 0 {
		var took atomic.Int64
		if err := b.claimFlowOn(ctx, home, p, claim, &took); err != nil {
			return fmt.Errorf("shard %d: %w", home, err)
		}
		if took.Load() > 0 || !b.strays.due(p.Queue) {
			return nil
		}
		order = b.others(home)
	} else {
		order = b.rotation()
	}
	found := false
	defer func() {
		if home >= 0 {
			b.strays.looked(p.Queue, found)
		}
	}()
	// A shard that fails is passed over, as in JobClaim. The claim function
	// keeps what its last run took, so the call fails when the shard whose
	// claim ran last failed (its takes did not commit), or when every
	// shard failed.
	var (
		failed []shardErr
		last   error
	)
	for _, s := range order {
		var took atomic.Int64
		ran := false
		err := b.claimFlowOn(ctx, s, p, func(tx backend.FlowTx) error { ran = true; return claim(tx) }, &took)
		if ran {
			last = err
		}
		if err != nil {
			failed = append(failed, shardErr{s, err})
			continue
		}
		if took.Load() > 0 {
			found = true
			return nil
		}
	}
	if last != nil || (len(failed) > 0 && len(failed) == len(order)) {
		return joinShardErrors(failed, false)
	}
	return nil
}

func (b *Backend) claimFlowOn(ctx context.Context, s int, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error, took *atomic.Int64) error {
	err := b.shards[s].JobClaimFlow(ctx, p, func(tx backend.FlowTx) error {
		return claim(&flowTx{tx: tx, shard: s, took: took})
	})
	return err
}

// flowTx gives the rows of a shard's flow claim their global ids and counts
// them.
type flowTx struct {
	tx    backend.FlowTx
	shard int
	took  *atomic.Int64
}

func (t *flowTx) count(n int) {
	if t.took != nil {
		t.took.Add(int64(n))
	}
}

func (t *flowTx) FlowRunning(ctx context.Context) (*backend.FlowRunning, error) {
	r, err := t.tx.FlowRunning(ctx)
	if err == nil && r.Quick != nil {
		globalRows(r.Quick.Jobs, t.shard)
		t.count(len(r.Quick.Jobs))
	}
	return r, err
}

func (t *flowTx) FlowKeys(ctx context.Context, after string, limit int) ([]string, error) {
	return t.tx.FlowKeys(ctx, after, limit)
}

func (t *flowTx) FlowRates(ctx context.Context, keys []string) (map[string]time.Time, error) {
	return t.tx.FlowRates(ctx, keys)
}

func (t *flowTx) FlowTake(ctx context.Context, takes []backend.FlowTake, final bool) ([]*backend.JobRow, error) {
	rows, err := t.tx.FlowTake(ctx, takes, final)
	if err == nil {
		globalRows(rows, t.shard)
		t.count(len(rows))
	}
	return rows, err
}

func (t *flowTx) FlowSaveRates(ctx context.Context, tats map[string]time.Time) error {
	return t.tx.FlowSaveRates(ctx, tats)
}

// QueueFlowUse adds up the use of each flow key over the shards.
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	var mu sync.Mutex
	uses := backend.FlowUses{}
	q := *p
	// Every key of each shard: a key's use is its sum over the shards, so
	// the busiest overall need not be among any one shard's busiest.
	q.Limit = 1 << 20
	err := b.some(b.all, func(s int) error {
		keys, err := b.shards[s].QueueFlowUse(ctx, &q)
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			uses.Add(k.Key, k.Running, k.Pending)
			if k.RateTAT != nil {
				if x, ok := uses[k.Key]; !ok || x.RateTAT == nil || k.RateTAT.After(*x.RateTAT) {
					uses.SetRate(k.Key, *k.RateTAT)
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("flow use of queue %s: %w", p.Queue, err)
	}
	return uses.Sorted(p.Limit), nil
}
