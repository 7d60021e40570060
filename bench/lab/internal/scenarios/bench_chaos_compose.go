package scenarios

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// The composed workloads of lab chaos (issues 38 and 39): a workflow of
// thousands of tasks, batches with callbacks, jobs of a many-worker, jobs
// of durable steps with sleeps and signal waits, and debounced inserts
// from every worker process. They run beside the plain chaos jobs, on the
// same worker processes and under the same faults, and the same checker
// audits their starts and completions; checkCompose adds what only they
// promise.

// composeOptions size the composed workloads; zero leaves one out.
type composeOptions struct {
	workflowTasks int
	batches       int
	batchSize     int
	many          int
	steps         int
	debounceKeys  int
}

// enabled reports whether any composed workload runs.
func (c composeOptions) enabled() bool {
	return c.workflowTasks > 0 || c.batches > 0 || c.many > 0 || c.steps > 0 || c.debounceKeys > 0
}

// composeDep is one dependency of a task (or a callback): the job it waits
// for, and whether it counts however that job ends (AfterAny) rather than
// only if it completed.
type composeDep struct {
	parent int64
	any    bool
}

// composeBatch is one batch as inserted.
type composeBatch struct {
	id       int64
	members  []int64
	discards int
}

// composePlan is what was inserted and what each job should end as.
type composePlan struct {
	workflowID int64
	tasks      []int64
	// deps are the jobs each task or callback waits for.
	deps map[int64][]composeDep
	// expect is the final state of every job inserted (callbacks are
	// checked against their batch).
	expect   map[int64]backend.State
	batches  []composeBatch
	many     []int64
	steps    []int64
	awaiting []int64
	// setup is how long the inserts took, before the faults began.
	setup time.Duration
}

// composePendingStates are the states in which a debounced job is pending.
var composePendingStates = []backend.State{backend.StateAvailable, backend.StateScheduled, backend.StateRetryable}

// composeOpts are the insert options of the tasks, batches and many-jobs.
var composeOpts = &spool.InsertOpts{Queue: composeQueue}

// reserve returns n sequence numbers of the producer's own (negative),
// to be acknowledged with ack once their insert returns.
func (p *chaosProducer) reserve(n int) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	seqs := make([]int64, n)
	for i := range seqs {
		seqs[i] = p.nextNeg
		p.nextNeg--
	}
	return seqs
}

// ack records the outcome of the insert of seqs.
func (p *chaosProducer) ack(seqs []int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.unacked = append(p.unacked, seqs...)
	} else {
		p.acked = append(p.acked, seqs...)
	}
}

// insertCompose inserts the composed workloads, before the faults begin,
// and returns the plan the checker holds them to.
func insertCompose(ctx context.Context, client *spool.Client, prod *chaosProducer, co composeOptions, seed uint64) (*composePlan, error) {
	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, 0x636f6d70))
	plan := &composePlan{deps: map[int64][]composeDep{}, expect: map[int64]backend.State{}}
	if co.workflowTasks > 0 {
		if err := plan.insertWorkflow(ctx, client, prod, rng, co.workflowTasks); err != nil {
			return nil, fmt.Errorf("insert workflow: %w", err)
		}
	}
	for b := range co.batches {
		if err := plan.insertBatch(ctx, client, prod, rng, b, co.batchSize); err != nil {
			return nil, fmt.Errorf("insert batch %d: %w", b, err)
		}
	}
	var err error
	plan.many, err = insertChunks(ctx, client, prod, co.many, composeOpts, func(seq *int64) spool.JobArgs {
		return chaosManyArgs{composeArgs{Seq: seq, Effect: true, SleepMS: rng.IntN(8), Fail: rng.IntN(15) == 0, Snooze: rng.IntN(15) == 0}}
	})
	if err != nil {
		return nil, fmt.Errorf("insert many-jobs: %w", err)
	}
	var awaits []bool
	plan.steps, err = insertChunks(ctx, client, prod, co.steps, &spool.InsertOpts{Queue: composeStepsQueue}, func(seq *int64) spool.JobArgs {
		a := composeArgs{Seq: seq}
		if rng.IntN(2) == 0 {
			a.SleepAfter, a.WaitMS = 1+rng.IntN(4), 100+rng.IntN(1500)
		}
		if rng.IntN(2) == 0 {
			a.AwaitAfter = 1 + rng.IntN(4)
		}
		awaits = append(awaits, a.AwaitAfter > 0)
		return chaosStepsArgs{a}
	})
	if err != nil {
		return nil, fmt.Errorf("insert steps jobs: %w", err)
	}
	for _, id := range plan.many {
		plan.expect[id] = backend.StateCompleted
	}
	for i, id := range plan.steps {
		plan.expect[id] = backend.StateCompleted
		if awaits[i] {
			plan.awaiting = append(plan.awaiting, id)
		}
	}
	plan.setup = time.Since(began)
	return plan, nil
}

// insertChunks inserts n jobs made by mk, 2,000 per InsertMany, each with
// a sequence number of the producer's, and returns their ids.
func insertChunks(ctx context.Context, client *spool.Client, prod *chaosProducer, n int, opts *spool.InsertOpts, mk func(seq *int64) spool.JobArgs) ([]int64, error) {
	var ids []int64
	for done := 0; done < n; {
		seqs := prod.reserve(min(2000, n-done))
		params := make([]spool.InsertManyParams, len(seqs))
		for i := range seqs {
			params[i] = spool.InsertManyParams{Args: mk(&seqs[i]), InsertOpts: opts}
		}
		res, err := client.InsertMany(ctx, params)
		prod.ack(seqs, err)
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
		done += len(seqs)
	}
	return ids, nil
}

// insertWorkflow inserts one workflow of n tasks: a root, 20 layers (each
// task after one to three tasks of the layer before) and a fan-in after
// every task of the last layer, however they end. One task in 100 of the
// last three layers is discarded on every attempt, its dependents after it
// by either policy (cancel them, or treat it as done); one in 30 fails its
// first attempt.
func (plan *composePlan) insertWorkflow(ctx context.Context, client *spool.Client, prod *chaosProducer, rng *rand.Rand, n int) error {
	n = max(n, 3)
	type task struct {
		name string
		args composeArgs
		deps []spool.Dep
	}
	seqs := prod.reserve(n)
	tasks := make([]task, 0, n)
	layers := min(20, n-2)
	var prev, cur []int // task indexes of the layer before, and of this one
	add := func(deps []spool.Dep) int {
		i := len(tasks)
		a := composeArgs{Seq: &seqs[i], SleepMS: rng.IntN(8), Fail: rng.IntN(30) == 0}
		tasks = append(tasks, task{name: fmt.Sprintf("t%d", i), args: a, deps: deps})
		return i
	}
	prev = []int{add(nil)}
	middle := n - 2
	for l := range layers {
		cur = cur[:0:0]
		for i := middle * l / layers; i < middle*(l+1)/layers; i++ {
			var deps []spool.Dep
			for _, p := range pickDistinct(rng, len(prev), 1+rng.IntN(3)) {
				parent := tasks[prev[p]]
				d := spool.After(parent.name)
				if parent.args.Discard && rng.IntN(2) == 0 {
					d = spool.AfterAny(parent.name)
				}
				deps = append(deps, d)
			}
			k := add(deps)
			// In the last three layers only, so that the cancellations
			// they cause stay a minority of the workflow.
			tasks[k].args.Discard = l >= layers-3 && rng.IntN(100) == 0
			cur = append(cur, k)
		}
		prev = cur
	}
	var fanIn []spool.Dep
	for _, k := range prev {
		fanIn = append(fanIn, spool.AfterAny(tasks[k].name))
	}
	add(fanIn)
	w := spool.NewWorkflow("chaos")
	for _, t := range tasks {
		w.Add(t.name, chaosTaskArgs{t.args}, composeOpts, t.deps...)
	}
	res, err := client.InsertWorkflow(ctx, w)
	prod.ack(seqs, err)
	if err != nil {
		return err
	}
	plan.workflowID = res.ID
	// Each task's expected end, in insertion order (dependencies first):
	// cancelled if a dependency by the default policy did not complete,
	// else its own outcome.
	for _, t := range tasks {
		id := res.Tasks[t.name]
		plan.tasks = append(plan.tasks, id)
		want := backend.StateCompleted
		if t.args.Discard {
			want = backend.StateDiscarded
		}
		for _, d := range t.deps {
			pid := res.Tasks[d.Task]
			plan.deps[id] = append(plan.deps[id], composeDep{parent: pid, any: d.OnFail == spool.TreatAsDone})
			if d.OnFail != spool.TreatAsDone && plan.expect[pid] != backend.StateCompleted {
				want = backend.StateCancelled
			}
		}
		plan.expect[id] = want
	}
	return nil
}

// pickDistinct returns k distinct indexes below n (all of them if k ≥ n).
func pickDistinct(rng *rand.Rand, n, k int) []int {
	if k >= n {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	return rng.Perm(n)[:k]
}

// composeRoles are the callback conditions.
var composeRoles = []string{"success", "failure", "complete"}

// insertBatch inserts batch b of size members with its three callbacks.
// Every fourth batch has a member that is discarded; every other batch is
// inserted open, half its members added by BatchAdd, then sealed.
func (plan *composePlan) insertBatch(ctx context.Context, client *spool.Client, prod *chaosProducer, rng *rand.Rand, b, size int) error {
	size = max(size, 2)
	seqs := prod.reserve(size)
	members := make([]spool.InsertManyParams, size)
	discards := 0
	for i := range members {
		a := composeArgs{Seq: &seqs[i], SleepMS: rng.IntN(8), Fail: rng.IntN(20) == 0, Discard: b%4 == 1 && i == 0}
		if a.Discard {
			discards++
		}
		members[i] = spool.InsertManyParams{Args: chaosTaskArgs{a}, InsertOpts: composeOpts}
	}
	cb := func(role string) *spool.BatchCallback {
		return &spool.BatchCallback{Args: chaosCallbackArgs{composeArgs{Role: role}}, Opts: composeOpts}
	}
	opts := spool.BatchOpts{Name: fmt.Sprintf("chaos-%d", b), OnSuccess: cb("success"), OnFailure: cb("failure"), OnComplete: cb("complete"), Open: b%2 == 0}
	first := members
	if opts.Open {
		first = members[:size/2]
	}
	res, err := client.InsertBatch(ctx, opts, first)
	if err == nil && opts.Open {
		var more []spool.InsertResult
		if more, err = client.BatchAdd(ctx, res.ID, members[size/2:]); err == nil {
			res.Members = append(res.Members, more...)
			_, err = client.BatchSeal(ctx, res.ID)
		}
	}
	prod.ack(seqs, err)
	if err != nil {
		return err
	}
	cbatch := composeBatch{id: res.ID, discards: discards}
	var deps []composeDep
	for i, m := range res.Members {
		cbatch.members = append(cbatch.members, m.ID)
		deps = append(deps, composeDep{parent: m.ID, any: true})
		plan.expect[m.ID] = backend.StateCompleted
		if members[i].Args.(chaosTaskArgs).Discard {
			plan.expect[m.ID] = backend.StateDiscarded
		}
	}
	row, err := client.Batch(ctx, res.ID)
	if err != nil {
		return err
	}
	for _, id := range []int64{row.OnSuccess, row.OnFailure, row.OnComplete} {
		plan.deps[id] = deps
	}
	plan.batches = append(plan.batches, cbatch)
	return nil
}

// signaller sends each awaiting steps job its signal at a random moment
// of span, in a random order (so that some come before the job waits),
// trying a failed send again until it succeeds.
type signaller struct {
	mu     sync.Mutex
	sent   map[int64]time.Time
	failed int
	done   chan struct{}
}

func startSignaller(ctx context.Context, client *spool.Client, ids []int64, span time.Duration, seed uint64) *signaller {
	s := &signaller{sent: map[int64]time.Time{}, done: make(chan struct{})}
	rng := rand.New(rand.NewPCG(seed, 0x7369676e))
	order := slices.Clone(ids)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	go func() {
		defer close(s.done)
		start := time.Now()
		for i, id := range order {
			if !sleepUntil(ctx, start.Add(span*time.Duration(i)/time.Duration(max(len(order), 1)))) {
				return
			}
			for ctx.Err() == nil {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := client.Signal(sctx, id, composeSignal, id)
				cancel()
				if err == nil {
					s.mu.Lock()
					s.sent[id] = time.Now()
					s.mu.Unlock()
					break
				}
				s.mu.Lock()
				s.failed++
				s.mu.Unlock()
				sleepUntil(ctx, time.Now().Add(200*time.Millisecond))
			}
		}
	}()
	return s
}

// debounceSampler reads the pending debounced jobs every interval, each
// time in one statement (one snapshot), and counts the keys with two.
type debounceSampler struct {
	mu sync.Mutex
	// samples taken; fromInserts counts (sample, key) pairs with two
	// pending jobs that never ran (two cycles started by inserts: a
	// breach); earlierCycle those with two pending where all but one had
	// run (a job of an earlier cycle retried or rescued: documented).
	samples, fromInserts, earlierCycle int
	examples                           []string
	done                               chan struct{}
}

func startDebounceSampler(ctx context.Context, client *spool.Client, every time.Duration) *debounceSampler {
	s := &debounceSampler{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			rows, err := client.JobList(qctx, &spool.JobListParams{Kind: chaosDebounceArgs{}.Kind(), States: composePendingStates, Limit: 10000})
			cancel()
			if err != nil {
				continue // the server restarting: no sample
			}
			s.add(rows)
		}
	}()
	return s
}

// add counts one sample.
func (s *debounceSampler) add(rows []*backend.JobRow) {
	type counts struct {
		pending, fresh int
		ids            []int64
	}
	byKey := map[string]*counts{}
	for _, r := range rows {
		a, _ := composeArgsOf(r.Args)
		c := byKey[a.Key]
		if c == nil {
			c = &counts{}
			byKey[a.Key] = c
		}
		c.pending++
		c.ids = append(c.ids, r.ID)
		if r.AttemptedAt == nil {
			c.fresh++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for key, c := range byKey {
		switch {
		case c.fresh > 1:
			s.fromInserts++
			if len(s.examples) < 5 {
				s.examples = append(s.examples, fmt.Sprintf("debounce_two_pending_from_inserts: key %s had %d pending jobs that never ran: %v", key, c.fresh, c.ids))
			}
		case c.pending > 1:
			s.earlierCycle++
		}
	}
}

// readComposeInputs reads, after the drain, the steps jobs' durable
// records and the batches' rows.
func readComposeInputs(ctx context.Context, client *spool.Client, plan *composePlan) (*composeInputs, error) {
	in := &composeInputs{plan: plan, durable: map[int64]*backend.JobDurable{}, batches: map[int64]*backend.Batch{}}
	for _, id := range plan.steps {
		d, err := client.JobDurable(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", id, err)
		}
		in.durable[id] = d
	}
	for _, b := range plan.batches {
		row, err := client.Batch(ctx, b.id)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", b.id, err)
		}
		in.batches[b.id] = row
	}
	return in, nil
}
