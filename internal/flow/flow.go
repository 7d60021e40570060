// Package flow decides what a flow-controlled claim takes: how many jobs of
// a queue may start given its global limit, and from which flow keys, given
// their per-key limits, order, rate limits and weights. It reads the facts
// from, and takes the jobs through, a backend.FlowTx, which holds the queue's
// flow lock, so the decision is exact across every process working the
// queue. A Controller belongs to one producer.
package flow

import (
	"context"
	"maps"
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
	// Jobs without a key have no index of their own, so looking for them
	// reads the head of the queue's pending jobs. After a look finds none,
	// the next is put off (keylessAt), longer after each empty one
	// (keylessMisses), up to keylessMaxWait.
	keylessAt     time.Time
	keylessMisses int
	// keylessSeen: the last look for jobs without a key found some.
	keylessSeen bool
	// keyNear: the last claim under a KeyLimit alone found a key that a
	// claim could take to its limit, so the next claims are not offered to
	// the store as a FlowQuick (it would decline) until one finds none.
	keyNear bool
	// stripesOffUntil: a striped claim was declined (the limits near), so
	// claims hold the whole lock until then.
	stripesOffUntil time.Time
}

// Striped quick claims (backend.FlowQuick.Stripes): the number of stripes,
// and how long claims hold the whole lock after a striped one was declined.
// With a limit far from binding, claims of a queue from several processes
// then run side by side instead of one at a time; near it, or when a
// stripe's share is less than the free workers want, each claim holds the
// whole lock and sees every other's jobs.
const (
	stripes    = 4
	stripeRest = 100 * time.Millisecond
)

// How long the look for jobs without a key is put off after empty ones:
// keylessMinWait, doubling, up to keylessMaxWait. A job without a key in a
// queue with per-key rules waits at most about keylessMaxWait more.
const (
	keylessMinWait = 10 * time.Millisecond
	keylessMaxWait = time.Second
)

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
	// More is set when keys that ran out of due jobs left units unused
	// that keys with room may fill: the caller should claim again at once.
	More bool
	// Declined is set when the store declined the FlowQuick claim it was
	// offered (a key could reach its KeyLimit) and took nothing: the
	// transaction is over, and the caller should claim again at once, which
	// the controller then decides key by key.
	Declined bool
}

// Bounds of one claim's listing of keys: enough to give every unit of a
// batch its own key twice over, within one claim's cost.
const (
	minGroups = 16
	maxGroups = 512
)

// Claim takes up to want jobs for free workers, and up to extra more for
// the caller's prefetch buffer, through tx. Prefetched jobs count against
// the limits like running ones but wait for a worker, so they are taken
// only from the lower half of a limit's slots (near the limit every slot
// goes to a worker that runs its job at once), and never under a rate limit
// (their handlers would start later than their claims, bunched) or an
// order (one job of a key at a time). The controller's own state changes
// only through the returned commit, which the caller runs once the
// transaction has committed (a backend may run its claim function again).
func (c *Controller) Claim(ctx context.Context, tx backend.FlowTx, want, extra int) (Result, func(), error) {
	var res Result
	nop := func() {}
	run, err := tx.FlowRunning(ctx)
	if err != nil || run.Paused || want+extra <= 0 {
		return res, nop, err
	}
	r := c.rules
	extra = c.prefetchable(extra)
	listLimit := groupLimit(want + extra)
	budget, spare := max(want, 0), max(extra, 0)
	if r.GlobalLimit > 0 {
		live := 0
		for _, n := range run.Live {
			live += n
		}
		if free := r.GlobalLimit - live; free < budget {
			budget, res.Held = max(free, 0), true
		}
		spare = min(spare, max(0, half(r.GlobalLimit)-live-budget))
	}
	// A quick claim's test of the per-key limit uses the count asked for,
	// before the global limit cuts it: the store's reads come a statement
	// later and can only have fewer jobs running (the lock keeps other
	// claims out), so where the store declined this test fails too.
	asked := max(want, 0) + max(extra, 0)
	near := c.rules.KeyLimit > 0 && !c.keyLimitCannotBind(run, asked)
	keepNear := func() { c.keyNear = near }
	if q := run.Quick; q != nil {
		switch {
		case len(q.Jobs) > 0:
		case q.Striped:
			// Near a limit, or nothing due: the whole lock tells which.
			res.Declined = true
			return res, func() { c.stripesOffUntil = time.Now().Add(stripeRest) }, nil
		case !q.Striped && near:
			res.Declined = true
			return res, keepNear, nil
		}
		res.Jobs = q.Jobs
		// A striped claim takes at most the stripe's share: when it took
		// that many, more may be due.
		res.More = q.Striped && len(q.Jobs) >= c.stripeCap() && len(q.Jobs) < asked
		return res, nop, nil
	}
	cannotBind := c.keyLimitCannotBind(run, budget+spare)
	if budget+spare <= 0 {
		return res, nop, nil
	}
	if !r.Keyed() || cannotBind {
		res.Jobs, err = tx.FlowTake(ctx, []backend.FlowTake{{Any: true, Max: budget + spare}}, true)
		return res, keepNear, err
	}
	res, commit, err := c.claimKeyed(ctx, tx, run, budget, spare, listLimit, res)
	if err != nil {
		return res, nil, err
	}
	return res, func() { keepNear(); commit() }, nil
}

// keyLimitCannotBind reports whether the only per-key rule is KeyLimit and
// no key can reach it in a claim of n jobs, even if all n were of the
// busiest key: the claim then takes jobs in claim order whatever their key,
// as a queue without per-key rules does, instead of key by key.
func (c *Controller) keyLimitCannotBind(run *backend.FlowRunning, n int) bool {
	if !c.keyLimitAlone() {
		return false
	}
	r := c.rules
	busiest := 0
	for _, live := range run.Live {
		busiest = max(busiest, live)
	}
	return busiest+n <= r.KeyLimit
}

// CountAll reports whether a claim reads FlowRunning.All: only ordered
// keys look at jobs whose lease ended (JobClaimFlowParams.CountAll).
func (c *Controller) CountAll() bool { return c.rules.Order != backend.FlowOrderNone }

// keyLimitAlone reports whether KeyLimit is the only per-key rule.
func (c *Controller) keyLimitAlone() bool {
	r := c.rules
	return r.KeyLimit > 0 && r.Order == backend.FlowOrderNone && r.Rate.Limit == 0 && !r.FairShare
}

// Quick returns the claim of want jobs and extra prefetch as a FlowQuick,
// which a store may decide in one round trip, when the queue's rules are a
// global limit, a KeyLimit alone or both, and the last claim found no key
// that a claim could take to its KeyLimit; nil otherwise. Its rule is
// Claim's.
func (c *Controller) Quick(want, extra int) *backend.FlowQuick {
	r := c.rules
	switch {
	case r.Keyed() && (!c.keyLimitAlone() || c.keyNear):
		return nil
	case !r.Keyed() && r.GlobalLimit == 0:
		return nil
	}
	q := &backend.FlowQuick{Want: max(want, 0), Extra: max(extra, 0), Limit: r.GlobalLimit, KeyLimit: r.KeyLimit}
	// A striped claim takes at most stripeCap: one that would cut what the
	// free workers ask for holds the whole lock instead (with a small limit
	// a claim of a few jobs at a time cannot keep up with short jobs).
	if share := c.stripeCap(); share > 0 && share >= want && !time.Now().Before(c.stripesOffUntil) {
		q.Stripes = stripes
	}
	return q
}

// stripeCap is the most a striped claim may take: the stripes' share of
// the lower half of each limit (0 when a limit is too small to share).
func (c *Controller) stripeCap() int {
	r := c.rules
	n := -1
	for _, limit := range []int{r.GlobalLimit, r.KeyLimit} {
		if limit > 0 && (n < 0 || limit/(2*stripes) < n) {
			n = limit / (2 * stripes)
		}
	}
	return max(n, 0)
}

// prefetchable is how much of extra the rules let a claim prefetch.
func (c *Controller) prefetchable(extra int) int {
	if c.rules.Rate.Limit > 0 || c.rules.Order != backend.FlowOrderNone {
		return 0
	}
	return extra
}

// groupLimit is how many keys a claim of n jobs lists.
func groupLimit(n int) int { return min(max(2*n, minGroups), maxGroups) }

// KeysHint returns the listing of keys (FlowKeys(after, limit)) that a
// claim of want jobs and extra prefetch will ask for first, so that the
// store may read it ahead, before it waits for the flow lock; ok is false
// when the rules do not look at keys.
func (c *Controller) KeysHint(want, extra int) (after string, limit int, ok bool) {
	if !c.rules.Keyed() {
		return "", 0, false
	}
	return c.after, groupLimit(want + c.prefetchable(extra)), true
}

// half is the lower half of a limit's slots, rounded up.
func half(limit int) int { return (limit + 1) / 2 }

// group is one flow key (or, "", the jobs without one) in a claim.
type group struct {
	key    string
	weight int
	rule   int // the most the rules let it start now
	cap    int // the most allocate may give it in the current stage
	quota  int // the units it is given
	got    int
	looked bool // a take asked it for jobs
	// limited: a rule let it start fewer than the workers wanted; wait is
	// how long until its rate lets it start one, when positive.
	limited bool
	wait    time.Duration
	tat     time.Time
}

func (c *Controller) claimKeyed(ctx context.Context, tx backend.FlowTx, run *backend.FlowRunning, budget, spare, limit int, res Result) (Result, func(), error) {
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
		g := &group{key: k, weight: r.weight(k), rule: budget + spare}
		if r.KeyLimit > 0 {
			g.rule = min(g.rule, r.KeyLimit-run.Live[k])
		}
		if r.Order != backend.FlowOrderNone && k != "" {
			if run.All[k] > 0 {
				g.rule = 0
			} else {
				g.rule = min(g.rule, 1)
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
			if tokens < g.rule {
				g.rule = max(tokens, 0)
				g.wait = g.tat.Add(-time.Duration(r.Rate.Burst-1) * interval).Sub(run.Now)
			}
		}
		g.limited = g.rule < budget
		g.rule = max(g.rule, 0)
		g.cap = min(g.rule, budget)
		groups = append(groups, g)
	}
	credit := cloneCredit(c.credit)
	// Workers first; then the prefetch, from the lower half of each key's
	// slots.
	allocate(groups, credit, budget)
	if spare > 0 {
		for _, g := range groups {
			room := g.rule - g.quota
			if r.KeyLimit > 0 {
				room = min(room, half(r.KeyLimit)-run.Live[g.key]-g.quota)
			}
			g.cap = g.quota + max(room, 0)
		}
		allocate(groups, credit, spare)
	}
	// Without rates to store, the take is the claim's last write, which
	// a store may commit with it.
	jobs, err := c.take(ctx, tx, groups, budget+spare, r.Rate.Limit == 0)
	if err != nil {
		return res, nil, err
	}
	for _, g := range groups {
		// A key listed has pending jobs; the jobs without a key are known
		// to have some when the take filled their quota, or, when a rule
		// left them none to take, if the last look found some.
		if g.limited && (g.key != "" || g.got > 0 && g.got == g.quota || !g.looked && c.keylessSeen) {
			res.Held = true
			if g.wait > 0 && (res.RetryIn == 0 || g.wait < res.RetryIn) {
				res.RetryIn = g.wait
			}
		}
	}
	if len(jobs) < budget {
		// Keys that ran out of due jobs lose their credit; if others used
		// all of theirs with room left, the caller claims again at once
		// for the units the empty ones did not use.
		for _, g := range groups {
			if g.got < g.quota {
				credit[g.key] = 0
			} else if g.got < g.rule {
				res.More = true
			}
		}
	}
	if r.Rate.Limit > 0 {
		saved := map[string]time.Time{}
		for _, g := range groups {
			if g.got > 0 {
				saved[g.key] = g.tat.Add(time.Duration(g.got) * interval)
			}
		}
		if len(saved) > 0 {
			if err := tx.FlowSaveRates(ctx, saved); err != nil {
				return res, nil, err
			}
		}
	}
	res.Jobs = jobs
	keylessLooked, keylessFound := false, false
	for _, g := range groups {
		if g.key == "" {
			keylessLooked, keylessFound = g.looked, g.got > 0
		}
	}
	commit := func() {
		if keylessLooked {
			c.keylessSeen = keylessFound
		}
		switch {
		case keylessFound:
			c.keylessMisses, c.keylessAt = 0, time.Time{}
		case keylessLooked:
			wait := min(keylessMinWait<<min(c.keylessMisses, 10), keylessMaxWait)
			c.keylessMisses++
			c.keylessAt = time.Now().Add(wait)
		}
		if !cut {
			// Every key was listed: credits of keys without work go.
			listed := make(map[string]bool, len(groups))
			for _, g := range groups {
				listed[g.key] = true
			}
			maps.DeleteFunc(credit, func(k string, _ int) bool { return !listed[k] })
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
	if !time.Now().Before(c.keylessAt) {
		keys = append(keys, "")
	}
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
func (c *Controller) take(ctx context.Context, tx backend.FlowTx, groups []*group, budget int, final bool) ([]*backend.JobRow, error) {
	var takes []backend.FlowTake
	for _, g := range groups {
		if g.quota == 0 {
			continue
		}
		g.looked = true
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
	jobs, err := tx.FlowTake(ctx, takes, final)
	if err != nil {
		return nil, err
	}
	got := make(map[string]int, len(takes))
	for _, j := range jobs {
		got[j.FlowKey]++
	}
	for _, g := range groups {
		g.got = got[g.key]
	}
	return jobs, nil
}

func cloneCredit(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		// Bounded so that a long-lived producer's credits cannot overflow.
		out[k] = max(min(v, math.MaxInt32), math.MinInt32)
	}
	return out
}
