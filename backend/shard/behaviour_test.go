package shard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/backend/shard"
)

func memoryShards(t *testing.T, n int, opts *shard.Options) *shard.Backend {
	t.Helper()
	shards := make([]backend.Backend, n)
	for i := range shards {
		shards[i] = memory.New()
	}
	be, err := shard.New(shards, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func job(queue, flowKey string) *backend.JobInsertParams {
	return &backend.JobInsertParams{Queue: queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 3, FlowKey: flowKey}
}

func insertJobs(t *testing.T, be backend.Backend, jobs ...*backend.JobInsertParams) []int64 {
	t.Helper()
	res, err := be.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	return res.IDs
}

// A job's id names its shard: the queue's, under ByQueue; an id of a shard
// the backend does not have is not found.
func TestIDsCarryShard(t *testing.T) {
	be := memoryShards(t, 3, nil)
	ctx := context.Background()
	for i := range 30 {
		q := fmt.Sprintf("q%d", i)
		id := insertJobs(t, be, job(q, ""))[0]
		if got, want := shard.JobShard(id), be.QueueShard(q); got != want {
			t.Fatalf("job of queue %s has id %d (shard %d), the queue is on shard %d", q, id, got, want)
		}
		local, err := be.Shard(be.QueueShard(q)).JobGet(ctx, id/shard.MaxShards)
		if err != nil || local.Queue != q {
			t.Fatalf("job %d is not at local id %d of its shard: %v", id, id/shard.MaxShards, err)
		}
		if j, err := be.JobGet(ctx, id); err != nil || j.ID != id {
			t.Fatalf("get %d: %+v %v", id, j, err)
		}
	}
	for _, id := range []int64{0, -5, 1*shard.MaxShards + 7, 3} {
		if _, err := be.JobGet(ctx, id); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("get %d: %v, want ErrNotFound", id, err)
		}
	}
}

// Rendezvous hashing spreads queues evenly, and a fourth shard takes about a
// quarter of them, each moved queue going to the new shard.
func TestPlacementSpreadAndGrowth(t *testing.T) {
	three, four := memoryShards(t, 3, nil), memoryShards(t, 4, nil)
	const n = 3000
	count := make([]int, 3)
	moved := 0
	for i := range n {
		q := fmt.Sprintf("queue-%d", i)
		a, b := three.QueueShard(q), four.QueueShard(q)
		count[a]++
		if a != b {
			moved++
			if b != 3 {
				t.Fatalf("queue %s moved from shard %d to shard %d, not to the new one", q, a, b)
			}
		}
	}
	for s, c := range count {
		if c < n/3*9/10 || c > n/3*11/10 {
			t.Errorf("shard %d holds %d of %d queues, want %d ±10%%", s, c, n, n/3)
		}
	}
	if f := float64(moved) / n; f < 0.22 || f > 0.28 {
		t.Errorf("a fourth shard moved %.3f of the queues, want about 0.25", f)
	}
}

// Options.Queues pins a queue; a pin to a shard that does not exist is
// refused.
func TestPinnedQueue(t *testing.T) {
	for s := range 3 {
		be, err := shard.New([]backend.Backend{memory.New(), memory.New(), memory.New()}, &shard.Options{Queues: map[string]int{"pinned": s}})
		if err != nil {
			t.Fatal(err)
		}
		if id := insertJobs(t, be, job("pinned", ""))[0]; shard.JobShard(id) != s {
			t.Errorf("pinned to %d, inserted on %d", s, shard.JobShard(id))
		}
	}
	if _, err := shard.New([]backend.Backend{memory.New()}, &shard.Options{Queues: map[string]int{"q": 1}}); err == nil {
		t.Error("a pin to shard 1 of 1 was accepted")
	}
	if _, err := shard.New(nil, nil); err == nil {
		t.Error("no shards accepted")
	}
}

// Under ByKey a key's jobs all land on one shard, in insert order, and jobs
// without a key spread evenly.
func TestByKeyPlacement(t *testing.T) {
	be := memoryShards(t, 3, &shard.Options{Placement: shard.ByKey})
	var jobs []*backend.JobInsertParams
	for i := range 300 {
		jobs = append(jobs, job("q", fmt.Sprintf("key-%d", i%30)))
	}
	for range 300 {
		jobs = append(jobs, job("q", ""))
	}
	ids := insertJobs(t, be, jobs...)
	shardOf := map[string]int{}
	last := map[string]int64{}
	spread := make([]int, 3)
	for i, id := range ids {
		k := jobs[i].FlowKey
		if k == "" {
			spread[shard.JobShard(id)]++
			continue
		}
		if s, ok := shardOf[k]; ok && s != shard.JobShard(id) {
			t.Fatalf("key %s on shards %d and %d", k, s, shard.JobShard(id))
		}
		shardOf[k] = shard.JobShard(id)
		if id <= last[k] {
			t.Fatalf("key %s: id %d after %d", k, id, last[k])
		}
		last[k] = id
	}
	if !slices.Equal(spread, []int{100, 100, 100}) {
		t.Errorf("jobs without a key spread %v, want 100 each", spread)
	}
}

// A transaction of another shard than the jobs' is refused and writes
// nothing; an untagged one is refused as a transaction of the wrong type.
func TestWrongShardRefused(t *testing.T) {
	be := memoryShards(t, 3, nil)
	ctx := context.Background()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[noteArgs]) error { return nil }))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws})
	if err != nil {
		t.Fatal(err)
	}
	home := be.QueueShard("q")
	other := (home + 1) % 3
	tx := be.Shard(other).(*memory.Backend).Begin()
	if _, err := c.InsertTx(ctx, shard.Tx{Shard: other, Tx: tx}, noteArgs{}, &spool.InsertOpts{Queue: "q"}); !errors.Is(err, shard.ErrWrongShard) {
		t.Fatalf("insert in another shard's transaction: %v, want ErrWrongShard", err)
	}
	if _, err := c.InsertTx(ctx, tx, noteArgs{}, &spool.InsertOpts{Queue: "q"}); !errors.Is(err, backend.ErrTxType) {
		t.Fatalf("insert in an untagged transaction: %v, want ErrTxType", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A call needing two shards in one transaction writes nothing.
	lazy := shard.NewLazyTx(func(_ context.Context, s int) (backend.Tx, error) { return be.Shard(s).(*memory.Backend).Begin(), nil })
	var q2 string
	for i := 0; q2 == ""; i++ {
		if q := fmt.Sprintf("x%d", i); be.QueueShard(q) != home {
			q2 = q
		}
	}
	_, err = be.JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: lazy, Jobs: []*backend.JobInsertParams{job("q", ""), job(q2, "")}})
	if !errors.Is(err, shard.ErrWrongShard) {
		t.Fatalf("one transaction for two shards: %v, want ErrWrongShard", err)
	}
	if _, _, bound := lazy.Bound(); bound {
		t.Fatal("the refused call began a transaction")
	}
	if stats, err := be.QueueStatsAll(ctx); err != nil || len(stats) != 0 {
		t.Fatalf("refused inserts wrote %+v (%v)", stats, err)
	}
	// Completing in another shard's transaction is refused; the job keeps
	// running, and completes in its own shard's.
	id := insertJobs(t, be, job("q", ""))[0]
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 1, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("claim: %+v %v", rows, err)
	}
	finish := func(s int) error {
		tx := be.Shard(s).(*memory.Backend).Begin()
		_, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Tx: shard.Tx{Shard: s, Tx: tx},
			Finishes: []backend.JobFinish{{Lease: rows[0].Lease(), Outcome: backend.OutcomeComplete}}})
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
	if err := finish(other); !errors.Is(err, shard.ErrWrongShard) {
		t.Fatalf("complete in another shard's transaction: %v, want ErrWrongShard", err)
	}
	if j, _ := be.JobGet(ctx, id); j.State != backend.StateRunning {
		t.Fatalf("after a refused completion the job is %s", j.State)
	}
	if err := finish(home); err != nil {
		t.Fatal(err)
	}
	if j, _ := be.JobGet(ctx, id); j.State != backend.StateCompleted {
		t.Fatalf("completed in its shard's transaction, the job is %s", j.State)
	}
}

type noteArgs struct{}

func (noteArgs) Kind() string { return "note" }

// failingInserts is a shard whose inserts fail, with err or, when nil,
// errInsertFails.
type failingInserts struct {
	backend.Backend
	err error
}

var errInsertFails = errors.New("this shard's inserts fail")

func (f failingInserts) JobInsertMany(context.Context, *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	if f.err != nil {
		return nil, f.err
	}
	return nil, errInsertFails
}

// An insert spread over shards that fails on one after another committed
// says which jobs were written.
func TestPartialInsert(t *testing.T) {
	good := memory.New()
	be, err := shard.New([]backend.Backend{good, failingInserts{Backend: memory.New()}}, &shard.Options{Placement: shard.ByKey})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*backend.JobInsertParams
	for i := range 10 {
		jobs = append(jobs, job("q", fmt.Sprintf("k%d", i)))
	}
	_, err = be.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs})
	var pe *shard.PartialInsertError
	if !errors.As(err, &pe) || !errors.Is(err, errInsertFails) {
		t.Fatalf("insert with a failing shard: %v, want a PartialInsertError", err)
	}
	var want []int
	for i, j := range jobs {
		if be.KeyShard(j.FlowKey) == 0 {
			want = append(want, i)
		}
	}
	if len(want) == 0 || len(want) == len(jobs) {
		t.Fatalf("keys placed %d of %d jobs on the good shard: the test needs both", len(want), len(jobs))
	}
	if !slices.Equal(pe.Committed, want) || len(pe.IDs) != len(want) {
		t.Fatalf("committed %v (ids %v), want %v", pe.Committed, pe.IDs, want)
	}
	for _, id := range pe.IDs {
		if _, err := be.JobGet(context.Background(), id); err != nil {
			t.Fatalf("reported committed job %d: %v", id, err)
		}
	}

	// A shard's failure that wrote nothing does not make the call's error
	// say nothing was written when another shard committed; when every
	// shard failed so, it does.
	notWritten := fmt.Errorf("connection refused: %w", backend.ErrNotWritten)
	be, err = shard.New([]backend.Backend{memory.New(), failingInserts{memory.New(), notWritten}}, &shard.Options{Placement: shard.ByKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = be.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs})
	if !errors.As(err, &pe) || errors.Is(err, backend.ErrNotWritten) {
		t.Fatalf("partial insert after a shard wrote nothing: %v (matches ErrNotWritten: %v), want a PartialInsertError that does not", err, errors.Is(err, backend.ErrNotWritten))
	}
	be, err = shard.New([]backend.Backend{failingInserts{memory.New(), notWritten}, failingInserts{memory.New(), notWritten}}, &shard.Options{Placement: shard.ByKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = be.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs}); !errors.Is(err, backend.ErrNotWritten) || errors.As(err, &pe) {
		t.Fatalf("every shard failed before writing: %v, want ErrNotWritten", err)
	}
}

// Listings page across shards in id order with no job twice or missed, both
// ways; bulk actions in small batches reach every job once.
func TestPagingAndBulkAcrossShards(t *testing.T) {
	be := memoryShards(t, 3, &shard.Options{Placement: shard.ByKey})
	ctx := context.Background()
	var jobs []*backend.JobInsertParams
	for i := range 100 {
		k := ""
		if i%4 == 0 {
			k = fmt.Sprintf("k%d", i%7) // uneven: some shards get more
		}
		jobs = append(jobs, job("q", k))
	}
	ids := insertJobs(t, be, jobs...)
	slices.Sort(ids)
	var got []int64
	for after := int64(0); ; {
		rows, err := be.JobList(ctx, &backend.JobListParams{AfterID: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if len(rows) < 7 {
			break
		}
		after = rows[len(rows)-1].ID
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("paged oldest first: %d ids, want %d in order", len(got), len(ids))
	}
	got = got[:0]
	for before := int64(0); ; {
		rows, err := be.JobList(ctx, &backend.JobListParams{Newest: true, BeforeID: before, Limit: 9})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if len(rows) < 9 {
			break
		}
		before = rows[len(rows)-1].ID
	}
	slices.Reverse(got)
	if !slices.Equal(got, ids) {
		t.Fatalf("paged newest first: %d ids, want %d in order", len(got), len(ids))
	}
	c, err := spool.NewClient(be, &spool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "q", BatchSize: 6})
	if err != nil || res.Changed != 100 {
		t.Fatalf("cancel in batches of 6: %+v %v, want 100 changed", res, err)
	}
	if res, err := c.JobsRetry(ctx, spool.JobFilter{Queue: "q", BatchSize: 11}); err != nil || res.Changed != 100 {
		t.Fatalf("retry in batches of 11: %+v %v, want 100 changed", res, err)
	}
	stats, err := be.QueueStatsAll(ctx)
	if err != nil || len(stats) != 1 || stats[0].Counts[backend.StateAvailable] != 100 {
		t.Fatalf("after cancel and retry: %+v %v", stats, err)
	}
}

// shard:// URLs open shards by their own URLs, with options among them; bad
// items are refused.
func TestOpenByURL(t *testing.T) {
	ctx := context.Background()
	be, err := backend.Open(ctx, "shard://placement=key;memory://url-a;memory://url-b;queue.pinned=1")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	sb := be.(*shard.Backend)
	if sb.Shards() != 2 || sb.QueueShard("x") != -1 {
		t.Fatalf("opened %d shards, placement by key: %v", sb.Shards(), sb.QueueShard("x") == -1)
	}
	id := insertJobs(t, be, job("q", "some-key"))[0]
	direct, err := backend.Open(ctx, fmt.Sprintf("memory://url-%c", "ab"[shard.JobShard(id)]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.JobGet(ctx, id/shard.MaxShards); err != nil {
		t.Fatalf("the job is not in the shard its id names: %v", err)
	}
	byQueue, err := backend.Open(ctx, "shard://queue.pinned=1;memory://url-c;memory://url-d")
	if err != nil {
		t.Fatal(err)
	}
	if byQueue.(*shard.Backend).QueueShard("pinned") != 1 {
		t.Fatal("queue.pinned=1 did not pin")
	}
	for _, bad := range []string{"shard://", "shard://memory://a;color=red", "shard://memory://a;queue.x=one",
		"shard://memory://a;queue.x=3", "shard://memory://a;nonsense", "shard://memory://a;shard://memory://b", "shard://nosuch://a"} {
		if b, err := backend.Open(ctx, bad); err == nil {
			_ = b.Close()
			t.Errorf("%s opened", bad)
		}
	}
}

// After a shard is added, the queues that moved to it still have their
// older jobs on their old shards: claims find them there (plain and
// flow-controlled queues), and listings by queue show them.
func TestGrowKeepsOldJobs(t *testing.T) {
	ctx := context.Background()
	a, b := memory.New(), memory.New()
	two, err := shard.New([]backend.Backend{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	three, err := shard.New([]backend.Backend{a.Reopen(), b.Reopen(), memory.New()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	queues := map[string]spool.QueueConfig{}
	for i := 0; len(moved) < 4; i++ {
		q := fmt.Sprintf("q%d", i)
		if three.QueueShard(q) != 2 {
			continue
		}
		moved = append(moved, q)
		cfg := spool.QueueConfig{MaxWorkers: 5}
		if len(moved)%2 == 0 {
			cfg.Flow = &spool.Flow{KeyLimit: 2}
		}
		queues[q] = cfg
		for n := range 10 {
			insertJobs(t, two, job(q, fmt.Sprintf("k%d", n%3)))
		}
	}
	if rows, err := three.JobList(ctx, &backend.JobListParams{Queue: moved[0]}); err != nil || len(rows) != 10 {
		t.Fatalf("listing a moved queue: %d jobs, %v; want its 10 on the old shard", len(rows), err)
	}
	done := make(chan struct{}, 40)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[kArgs]) error { done <- struct{}{}; return nil }))
	c, err := spool.NewClient(three, &spool.Config{Workers: ws, Queues: queues, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	for i := range 40 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			stats, _ := three.QueueStatsAll(ctx)
			t.Fatalf("%d of 40 jobs of moved queues ran: %+v", i, stats)
		}
	}
}

type kArgs struct{}

func (kArgs) Kind() string { return "k" }

// A LazyTx ends the transaction it began when that has context-taking
// Commit and Rollback, refuses to guess otherwise, and has nothing to end
// when no call needed it.
func TestLazyTxEnds(t *testing.T) {
	ctx := context.Background()
	be := memoryShards(t, 2, nil)
	if err := shard.NewLazyTx(nil).Commit(ctx); err != nil {
		t.Fatalf("commit of a transaction never begun: %v", err)
	}
	tx := shard.NewLazyTx(func(_ context.Context, s int) (backend.Tx, error) { return be.Shard(s).(*memory.Backend).Begin(), nil })
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: tx, Jobs: []*backend.JobInsertParams{job("q", "")}}); err != nil {
		t.Fatal(err)
	}
	if stats, _ := be.QueueStatsAll(ctx); len(stats) != 0 {
		t.Fatal("an insert in an open transaction is visible")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if stats, _ := be.QueueStatsAll(ctx); len(stats) != 1 {
		t.Fatal("the committed insert is not visible")
	}
	odd := shard.NewLazyTx(func(context.Context, int) (backend.Tx, error) { return struct{}{}, nil })
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: odd, Jobs: []*backend.JobInsertParams{job("q", "")}}); err == nil {
		t.Fatal("a memory store took a struct{} as its transaction")
	}
	if err := odd.Rollback(ctx); err == nil || !strings.Contains(err.Error(), "Bound") {
		t.Fatalf("rollback of a transaction without Rollback(ctx): %v", err)
	}
}
