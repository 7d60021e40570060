// Package flow decides what a flow-controlled claim takes: how many jobs of
// a queue may start given its global limit, and from which flow keys, given
// their per-key limits, order, rate limits and weights. It reads the facts
// from, and takes the jobs through, a backend.FlowTx, which holds the queue's
// flow lock, so the decision is exact across every process working the
// queue. A Controller belongs to one producer.
package flow

import (
	"context"
	"math"
	"time"

	"github.com/spoolq/spool/backend"
)

// Rules are a queue's flow rules, already validated.
type Rules struct {
	// GlobalLimit caps the queue's running jobs across all processes (0: no
	// cap).
	GlobalLimit int
	// KeyLimit caps each flow key's running jobs (0: no cap).
	KeyLimit int
	// Order runs each key's jobs one at a time in insert order.
	Order backend.FlowOrder
	// Rate caps each key's starts (Limit 0: no cap).
	Rate Rate
	// FairShare shares claims among keys by weight.
	FairShare bool
	// Weights are keys' weights (1 for a key not listed, or DefaultWeight).
	Weights       map[string]int
	DefaultWeight int
}

// Rate is a rate limit of at most Limit starts per key in any window of
// length Per, enforced as GCRA: starts are spaced Per/(Limit-Burst+1) apart
// on average, up to Burst of them at once. Any m starts of a key span at
// least (m-Burst) intervals, so a window shorter than Per holds at most
// Limit of them, and the long-run rate is (Limit-Burst+1) per Per.
type Rate struct {
	Limit int
	Per   time.Duration
	Burst int
}

// interval is the GCRA emission interval.
// Rounded up to the stores' microseconds, so that rounding never shortens
// it.
func (r Rate) interval() time.Duration {
	n := time.Duration(r.Limit - r.Burst + 1)
	iv := (r.Per + n - 1) / n
	if rem := iv % time.Microsecond; rem != 0 {
		iv += time.Microsecond - rem
	}
	return max(iv, time.Microsecond)
}

// Keyed reports whether the rules look at flow keys.
func (r *Rules) Keyed() bool {
	return r.KeyLimit > 0 || r.Order != backend.FlowOrderNone || r.Rate.Limit > 0 || r.FairShare
}

func (r *Rules) weight(key string) int {
	if w, ok := r.Weights[key]; ok && w > 0 {
		return w
	}
	if r.DefaultWeight > 0 {
		return r.DefaultWeight
	}
	return 1
}

// Controller is one producer's flow state: where its rotation over keys
// stands and each key's round-robin credit. Not safe for concurrent use.
type Controller struct {
	rules Rules
	// after is the last key of a listing cut short at maxGroups: the next
	// claim lists the keys after it first.
	after  string
	credit map[string]int
}

// NewController returns a controller for rules.
func NewController(rules Rules) *Controller {
	return &Controller{rules: rules, credit: map[string]int{}}
}

// Rules returns the controller's rules.
func (c *Controller) Rules() Rules { return c.rules }

// Result is what a claim took and why it took less than asked.
type Result struct {
	Jobs []*backend.JobRow
	// Held is set when a rule (a limit, a rate, an order) held back jobs
	// that may be ready: they may be claimable soon without any new insert,
	// so the caller should claim again before its next ordinary poll.
	Held bool
	// RetryIn, when positive, is when the earliest rate-held key may start
	// again (by the store's clock).
	RetryIn time.Duration
}

// Bounds of one claim's listing of keys: enough to give every unit of a
// batch its own key twice over, within one claim's cost.
const (
	minGroups = 16
	maxGroups = 512
)

// Claim takes up to max jobs through tx. The controller's own state changes
// only through the returned commit, which the caller runs once the
// transaction has committed (a backend may run its claim function again).
func (c *Controller) Claim(ctx context.Context, tx backend.FlowTx, max int) (Result, func(), error) {
	var res Result
	nop := func() {}
	run, err := tx.FlowRunning(ctx)
	if err != nil || run.Paused || max <= 0 {
		return res, nop, err
	}
	budget := max
	if c.rules.GlobalLimit > 0 {
		live := 0
		for _, n := range run.Live {
			live += n
		}
		if free := c.rules.GlobalLimit - live; free < budget {
			budget, res.Held = free, true
		}
	}
	if budget <= 0 {
		return res, nop, nil
	}
	if !c.rules.Keyed() {
		res.Jobs, err = tx.FlowTake(ctx, []backend.FlowTake{{Any: true, Max: budget}})
		return res, nop, err
	}
	return c.claimKeyed(ctx, tx, run, budget, res)
}

// group is one flow key (or, "", the jobs without one) in a claim.
type group struct {
	key    string
	weight int
	cap    int // the most the rules let it start now
	quota  int // the units it is given
	got    int
	tat    time.Time
}

func (c *Controller) claimKeyed(ctx context.Context, tx backend.FlowTx, run *backend.FlowRunning, budget int, res Result) (Result, func(), error) {
	limit := min(max(2*budget, minGroups), maxGroups)
	keys, cut, err := c.list(ctx, tx, limit)
	if err != nil {
		return res, nil, err
	}
	var tats map[string]time.Time
	r := c.rules
	if r.Rate.Limit > 0 {
		if tats, err = tx.FlowRates(ctx, keys); err != nil {
			return res, nil, err
		}
	}
	interval := time.Duration(0)
	if r.Rate.Limit > 0 {
		interval = r.Rate.interval()
	}
	groups := make([]*group, 0, len(keys))
	for _, k := range keys {
		g := &group{key: k, weight: r.weight(k), cap: budget}
		if r.KeyLimit > 0 {
			g.cap = min(g.cap, r.KeyLimit-run.Live[k])
		}
		if r.Order != backend.FlowOrderNone && k != "" {
			if run.All[k] > 0 {
				g.cap = 0
			} else {
				g.cap = min(g.cap, 1)
			}
		}
		if r.Rate.Limit > 0 {
			g.tat = tats[k]
			if g.tat.Before(run.Now) {
				g.tat = run.Now
			}
			// Starts allowed now: each moves the arrival time on by one
			// interval, and it may run at most Burst intervals ahead.
			ahead := run.Now.Add(time.Duration(r.Rate.Burst) * interval).Sub(g.tat)
			tokens := int(ahead / interval)
			if tokens < g.cap {
				g.cap = max(tokens, 0)
				wait := g.tat.Add(-time.Duration(r.Rate.Burst-1) * interval).Sub(run.Now)
				if wait > 0 && (res.RetryIn == 0 || wait < res.RetryIn) {
					res.RetryIn = wait
				}
			}
		}
		if g.cap < budget {
			res.Held = true
		}
		g.cap = max(g.cap, 0)
		groups = append(groups, g)
	}
	credit := cloneCredit(c.credit)
	allocate(groups, credit, budget)
	jobs, err := c.take(ctx, tx, groups, budget)
	if err != nil {
		return res, nil, err
	}
	left := budget - len(jobs)
	if left > 0 {
		// Work-conserving: what groups that ran out of due jobs did not use
		// goes to those that used all of theirs.
		again := false
		for _, g := range groups {
			if g.got < g.quota {
				g.cap, credit[g.key] = 0, 0
			} else {
				g.cap -= g.got
				again = again || g.cap > 0
			}
			g.quota, g.got = 0, 0
		}
		if again {
			allocate(groups, credit, left)
			more, err := c.take(ctx, tx, groups, left)
			if err != nil {
				return res, nil, err
			}
			jobs = append(jobs, more...)
		}
	}
	if r.Rate.Limit > 0 {
		saved := map[string]time.Time{}
		for _, g := range groups {
			n := countKey(jobs, g.key)
			if n > 0 {
				saved[g.key] = g.tat.Add(time.Duration(n) * interval)
			}
		}
		if len(saved) > 0 {
			if err := tx.FlowSaveRates(ctx, saved); err != nil {
				return res, nil, err
			}
		}
	}
	res.Jobs = jobs
	commit := func() {
		if !cut {
			// Every key was listed: credits of keys without work go.
			for k := range credit {
				if !contains(keys, k) {
					delete(credit, k)
				}
			}
			c.after = "" // the listing wrapped: the first key leads next time
		} else {
			c.after = keys[len(keys)-1]
		}
		if len(credit) > 4*maxGroups {
			clear(credit)
		}
		c.credit = credit
	}
	return res, commit, nil
}

// list returns the groups of one claim in rotation order: the keys after
// c.after, then the jobs without a key (""), then the keys from the first
// up to c.after; at most limit of them. cut reports that keys were left out.
func (c *Controller) list(ctx context.Context, tx backend.FlowTx, limit int) (keys []string, cut bool, err error) {
	first, err := tx.FlowKeys(ctx, c.after, limit)
	if err != nil {
		return nil, false, err
	}
	keys = append(keys, first...)
	if len(keys) >= limit {
		return keys, true, nil
	}
	keys = append(keys, "")
	if c.after == "" {
		return keys, false, nil
	}
	rest, err := tx.FlowKeys(ctx, "", limit-len(keys))
	if err != nil {
		return nil, false, err
	}
	for _, k := range rest {
		if k > c.after {
			break
		}
		keys = append(keys, k)
	}
	return keys, len(keys) >= limit, nil
}

// allocate gives budget units to groups by smooth weighted round-robin:
// each unit goes to the group with the most credit among those under their
// cap, after every such group earned its weight; the winner pays the total.
// Over many units each group gets its weight's share of what the others
// leave, and no group waits more than a round for its first unit.
func allocate(groups []*group, credit map[string]int, budget int) {
	for range budget {
		var best *group
		total := 0
		for _, g := range groups {
			if g.quota >= g.cap {
				continue
			}
			credit[g.key] += g.weight
			total += g.weight
			if best == nil || credit[g.key] > credit[best.key] {
				best = g
			}
		}
		if best == nil {
			return
		}
		best.quota++
		credit[best.key] -= total
	}
}

// take claims each group's quota in one FlowTake call.
func (c *Controller) take(ctx context.Context, tx backend.FlowTx, groups []*group, budget int) ([]*backend.JobRow, error) {
	var takes []backend.FlowTake
	for _, g := range groups {
		if g.quota == 0 {
			continue
		}
		t := backend.FlowTake{Key: g.key, Max: g.quota}
		if g.key == "" {
			t.Window = max(4*budget, 64)
		} else {
			t.Order = c.rules.Order
		}
		takes = append(takes, t)
	}
	if len(takes) == 0 {
		return nil, nil
	}
	jobs, err := tx.FlowTake(ctx, takes)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		g.got += countKey(jobs, g.key)
	}
	return jobs, nil
}

func countKey(jobs []*backend.JobRow, key string) int {
	n := 0
	for _, j := range jobs {
		if j.FlowKey == key {
			n++
		}
	}
	return n
}

func contains(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

func cloneCredit(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		// Bounded so that a long-lived producer's credits cannot overflow.
		out[k] = max(min(v, math.MaxInt32), math.MinInt32)
	}
	return out
}
