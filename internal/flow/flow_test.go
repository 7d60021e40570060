package flow

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

func TestAllocateWeights(t *testing.T) {
	// Over many claims of one unit each, with credits carried between
	// them, weights 3:1 give 3:1.
	credit := map[string]int{}
	got := map[string]int{}
	for range 400 {
		gs := []*group{{key: "a", weight: 3, cap: 1}, {key: "b", weight: 1, cap: 1}}
		allocate(gs, credit, 1)
		for _, g := range gs {
			got[g.key] += g.quota
		}
	}
	if got["a"] != 300 || got["b"] != 100 {
		t.Fatalf("shares %v, want a 300, b 100", got)
	}
}

func TestAllocateCapsAndWorkConserving(t *testing.T) {
	gs := []*group{{key: "a", weight: 1, cap: 2}, {key: "b", weight: 5, cap: 1}, {key: "c", weight: 1, cap: 10}}
	allocate(gs, map[string]int{}, 8)
	want := map[string]int{"a": 2, "b": 1, "c": 5}
	for _, g := range gs {
		if g.quota != want[g.key] {
			t.Fatalf("key %s got %d, want %d (caps bind, the rest goes to who has room)", g.key, g.quota, want[g.key])
		}
	}
	none := []*group{{key: "a", weight: 1, cap: 0}}
	allocate(none, map[string]int{}, 3)
	if none[0].quota != 0 {
		t.Fatalf("a group at its cap got %d", none[0].quota)
	}
}

func TestAllocateEveryGroupWithinARound(t *testing.T) {
	// 50 groups, weight 1, budget 10 per claim: every group gets a unit
	// within 5 claims.
	credit := map[string]int{}
	seen := map[string]bool{}
	for range 5 {
		var gs []*group
		for i := range 50 {
			gs = append(gs, &group{key: string(rune('A' + i)), weight: 1, cap: 10})
		}
		allocate(gs, credit, 10)
		for _, g := range gs {
			if g.quota > 0 {
				seen[g.key] = true
			}
		}
	}
	if len(seen) != 50 {
		t.Fatalf("%d of 50 groups served in 5 claims", len(seen))
	}
}

func TestRateInterval(t *testing.T) {
	for _, c := range []struct {
		r    Rate
		want time.Duration
	}{
		{Rate{Limit: 5, Per: 500 * time.Millisecond, Burst: 2}, 125 * time.Millisecond},
		{Rate{Limit: 3, Per: time.Second, Burst: 1}, 333334 * time.Microsecond}, // rounded up
		{Rate{Limit: 1_000_000, Per: time.Millisecond, Burst: 1}, time.Microsecond},
	} {
		if got := c.r.interval(); got != c.want {
			t.Fatalf("%+v: interval %s, want %s", c.r, got, c.want)
		}
	}
}

// fakeTx is a FlowTx over fixed reads that records takes.
type fakeTx struct {
	run   backend.FlowRunning
	takes [][]backend.FlowTake
}

func (f *fakeTx) FlowRunning(context.Context) (*backend.FlowRunning, error) { return &f.run, nil }
func (f *fakeTx) FlowKeys(context.Context, string, int) ([]string, error)   { return nil, nil }
func (f *fakeTx) FlowRates(context.Context, []string) (map[string]time.Time, error) {
	return nil, nil
}
func (f *fakeTx) FlowSaveRates(context.Context, map[string]time.Time) error { return nil }
func (f *fakeTx) FlowTake(_ context.Context, takes []backend.FlowTake, _ bool) ([]*backend.JobRow, error) {
	f.takes = append(f.takes, takes)
	return nil, nil
}

// A quick claim under a per-key limit is declined while a key could reach
// the limit with all that was asked for, and offered again once a claim
// finds no such key.
func TestQuickKeyLimit(t *testing.T) {
	ctx := context.Background()
	c := NewController(Rules{KeyLimit: 10})
	q := c.Quick(4, 4)
	if q == nil || q.KeyLimit != 10 || q.Limit != 0 || q.Want != 4 || q.Extra != 4 {
		t.Fatalf("first offer %+v, want a quick claim of 4+4 under a key limit of 10", q)
	}
	claim := func(live map[string]int, quick *backend.FlowQuickResult) (Result, *fakeTx) {
		t.Helper()
		tx := &fakeTx{run: backend.FlowRunning{Live: live, All: live, Quick: quick}}
		res, commit, err := c.Claim(ctx, tx, 4, 4)
		if err != nil {
			t.Fatal(err)
		}
		commit()
		return res, tx
	}
	// 3 running of key a, 8 asked: a could reach 11.
	if res, _ := claim(map[string]int{"a": 3}, &backend.FlowQuickResult{}); !res.Declined {
		t.Fatalf("quick claim with a key near its limit: %+v, want declined", res)
	}
	if q := c.Quick(4, 4); q != nil {
		t.Fatalf("offered %+v after a decline", q)
	}
	// The store took jobs (it read fewer running): they are the claim's.
	taken := &backend.FlowQuickResult{Jobs: []*backend.JobRow{{ID: 1}}}
	if res, _ := claim(map[string]int{"a": 3}, taken); res.Declined || len(res.Jobs) != 1 {
		t.Fatalf("quick claim that took a job: %+v, want the job", res)
	}
	// Key by key, with no key near: the take is in claim order, and quick
	// claims are offered again.
	res, tx := claim(map[string]int{"a": 2}, nil)
	if res.Declined || len(tx.takes) != 1 || !tx.takes[0][0].Any || tx.takes[0][0].Max != 8 {
		t.Fatalf("claim with no key near its limit took %+v (%+v), want one take of any 8", tx.takes, res)
	}
	if q := c.Quick(4, 4); q == nil {
		t.Fatal("no quick claim offered once no key was near its limit")
	}
	// Rules beyond a key limit are never quick.
	if q := NewController(Rules{KeyLimit: 10, FairShare: true}).Quick(4, 4); q != nil {
		t.Fatalf("fair share offered %+v", q)
	}
}

// A striped quick claim that took nothing is declined, and claims hold the
// whole lock for a while; one that took its full share says more may be
// due.
func TestQuickStriped(t *testing.T) {
	ctx := context.Background()
	c := NewController(Rules{GlobalLimit: 16})
	// Its share of 16 is 2: a claim for 5 free workers holds the whole
	// lock, one for 2 (and prefetch) is striped.
	if q := c.Quick(5, 5); q == nil || q.Stripes != 0 {
		t.Fatalf("offer for 5 workers %+v, want the whole lock (a stripe's share is 2)", q)
	}
	q := c.Quick(2, 5)
	if q == nil || q.Stripes != stripes {
		t.Fatalf("offer %+v, want a striped quick claim", q)
	}
	claim := func(live int, quick *backend.FlowQuickResult) Result {
		t.Helper()
		tx := &fakeTx{run: backend.FlowRunning{Live: map[string]int{"": live}, Quick: quick}}
		res, commit, err := c.Claim(ctx, tx, 2, 5)
		if err != nil {
			t.Fatal(err)
		}
		commit()
		return res
	}
	// Taking its share, 2 of the 7 asked, more may be due.
	two := []*backend.JobRow{{ID: 1}, {ID: 2}}
	if res := claim(0, &backend.FlowQuickResult{Jobs: two, Striped: true}); res.Declined || !res.More || len(res.Jobs) != 2 {
		t.Fatalf("striped claim of its share: %+v, want its 2 jobs and More", res)
	}
	// Nothing taken: near the limit, or nothing due; the whole lock will
	// tell.
	if res := claim(9, &backend.FlowQuickResult{Striped: true}); !res.Declined {
		t.Fatalf("striped claim that took nothing: %+v, want declined", res)
	}
	if q := c.Quick(2, 5); q == nil || q.Stripes != 0 {
		t.Fatalf("offer after a decline %+v, want the whole lock", q)
	}
	// A limit too small to share is never striped.
	if q := NewController(Rules{GlobalLimit: 7}).Quick(0, 5); q == nil || q.Stripes != 0 {
		t.Fatalf("limit 7 offered %+v, want the whole lock", q)
	}
}
