package shard_test

import (
	"context"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/backend/shard"
	"github.com/spoolq/spool/conformance"
)

// memoryHarness runs the suite on n memory stores behind one sharded
// backend.
func memoryHarness(n int, opts *shard.Options) conformance.Harness {
	open := func(t *testing.T, shards []backend.Backend) backend.Backend {
		be, err := shard.New(shards, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	return conformance.Harness{
		NewBackend: func(t *testing.T) backend.Backend {
			shards := make([]backend.Backend, n)
			for i := range shards {
				shards[i] = memory.New()
			}
			return open(t, shards)
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			sb := be.(*shard.Backend)
			shards := make([]backend.Backend, sb.Shards())
			for i := range shards {
				shards[i] = sb.Shard(i).(*memory.Backend).Reopen()
			}
			return open(t, shards)
		},
		HoldClaims: func(be backend.Backend, gate *conformance.ClaimGate) backend.Backend {
			return heldClaims{be.(*shard.Backend), gate}
		},
		BeginTx: func(t *testing.T, be backend.Backend) conformance.Tx {
			sb := be.(*shard.Backend)
			return shard.NewLazyTx(func(_ context.Context, s int) (backend.Tx, error) {
				return sb.Shard(s).(*memory.Backend).Begin(), nil
			})
		},
		Exceptions: map[string]string{"InsertUnmigrated": "a store in memory has no schema to migrate: it is usable, and reports itself migrated, from the moment it exists"},
	}
}

// TestConformanceByQueue runs the conformance suite over three memory
// stores, each queue on one of them.
func TestConformanceByQueue(t *testing.T) { conformance.Run(t, memoryHarness(3, nil)) }

// TestConformanceByKey runs it with every queue spread over the three; the
// guarantees that hold per shard are asserted per shard.
func TestConformanceByKey(t *testing.T) {
	h := memoryHarness(3, &shard.Options{Placement: shard.ByKey})
	h.Spread = spreadByKey()
	conformance.Run(t, h)
}

// spreadByKey tells the conformance suite where a sharded backend placing
// by key puts jobs, and which guarantees hold per shard.
func spreadByKey() *conformance.Spread {
	return &conformance.Spread{
		StoreOf:  func(_ backend.Backend, id int64) int { return shard.JobShard(id) },
		KeyStore: func(be backend.Backend, key string) int { return be.(*shard.Backend).KeyShard(key) },
		PerStore: shard.ConformancePerShardByKey,
	}
}

// heldClaims is a sharded backend whose claims pass a conformance.ClaimGate
// (Harness.HoldClaims); the embedded backend keeps its optional interfaces.
type heldClaims struct {
	*shard.Backend
	*conformance.ClaimGate
}

func (h heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}
