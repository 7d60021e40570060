package shard_test

import (
	"sync/atomic"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/backend/shard"
)

// demandShard is a memory store that counts the functions registered with
// it as backend.WakeDemand.
type demandShard struct {
	*memory.Backend
	registered atomic.Int64
}

func (d *demandShard) AddWakeDemand(func() bool) (remove func()) {
	d.registered.Add(1)
	return func() { d.registered.Add(-1) }
}

// TestWakeDemandReachesEveryShard: what a client registers as
// backend.WakeDemand reaches every shard that takes it (its idle workers
// claim from all of them), and its removal removes it from each.
func TestWakeDemandReachesEveryShard(t *testing.T) {
	a, b := &demandShard{Backend: memory.New()}, &demandShard{Backend: memory.New()}
	be, err := shard.New([]backend.Backend{a, memory.New(), b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	remove := be.AddWakeDemand(func() bool { return true })
	if a.registered.Load() != 1 || b.registered.Load() != 1 {
		t.Fatalf("registered %d and %d times, want 1 on each shard that takes it", a.registered.Load(), b.registered.Load())
	}
	remove()
	if a.registered.Load() != 0 || b.registered.Load() != 0 {
		t.Fatalf("%d and %d left after the removal, want none", a.registered.Load(), b.registered.Load())
	}
}
