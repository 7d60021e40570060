package backend

import (
	"context"
	"time"
)

// FlowKeyMaxLen is the longest flow key a backend stores, in bytes.
const FlowKeyMaxLen = 255

// FlowOrder is how a queue orders the jobs of one flow key.
type FlowOrder uint8

// Orders of a key's jobs.
const (
	// FlowOrderNone runs a key's jobs in claim order, as many at once as
	// the limits allow.
	FlowOrderNone FlowOrder = iota
	// FlowOrderBlock runs a key's jobs one at a time in insert order; the
	// key's oldest unfinished job runs next, so a job waiting for a retry
	// (or a delayed job) holds back every later job of its key until it
	// completes, is discarded or is cancelled.
	FlowOrderBlock
	// FlowOrderStepAside runs a key's jobs one at a time in insert order,
	// but a job that is not due (waiting for a retry, or delayed) steps
	// aside: later due jobs of its key run meanwhile, and it runs next once
	// it is due again.
	FlowOrderStepAside
)

// JobClaimFlowParams names the queue of a flow-controlled claim and the
// lease its jobs get.
type JobClaimFlowParams struct {
	Queue   string
	Lease   time.Duration // added to the store's clock
	ClaimID string        // recorded as the lease holder, as in JobClaimParams
	// KeysLimit > 0 says the claim will first list FlowKeys(KeysAfter,
	// KeysLimit): a store may read that listing ahead, before it waits for
	// the flow lock (the listing is a hint of where jobs are; the rules
	// are decided on what is read under the lock).
	KeysAfter string
	KeysLimit int
	// CountAll says the claim reads FlowRunning.All (its rules order keys):
	// without it a store may leave All empty, and count only the jobs
	// whose lease has not ended.
	CountAll bool
	// Quick, when set, offers the store the whole claim as one decision
	// (FlowQuick): a store may then decide it in its first round trip and
	// report it in FlowRunning.Quick.
	Quick *FlowQuick
}

// FlowQuick is a claim under a global limit, a per-key limit alone, or
// both: take Want jobs for free workers, fewer if the global limit leaves
// fewer slots (Limit minus the jobs running with leases not ended), plus up
// to Extra for prefetch from the lower half of the global limit's slots
// only (while the running jobs, those for workers and those for prefetch
// together stay at or below (Limit+1)/2), in claim order whatever their
// key. Limit 0 is no global limit. With KeyLimit > 0 the store takes
// nothing (it declines) when the busiest key's (or the jobs without a
// key's) running jobs with leases not ended plus that claim's count would
// pass KeyLimit: the claim cannot then ignore keys.
//
// Stripes > 0 lets the store hold only a stripe of the flow lock: one of
// Stripes parts, exclusively, with the rest of the lock shared, so that up
// to Stripes such claims of the queue run at once (a claim holding the
// whole lock excludes them all). Each must then keep to the striped rule,
// which holds the limits whatever the other stripes' claims in flight
// take: with c = Limit/(2·Stripes) and k = KeyLimit/(2·Stripes) (integer
// division; a limit of 0 sets none), it takes at most c and at most k jobs,
// and nothing (it declines) unless Limit minus the running jobs is at least
// Stripes·c and KeyLimit minus the busiest key's is at least Stripes·k.
// The store need not read Live for such a claim: one that took nothing
// is claimed again holding the whole lock.
type FlowQuick struct {
	Want, Extra, Limit, KeyLimit int
	Stripes                      int
}

// Allowed is how many jobs the claim takes by its rule, given live, the
// queue's running jobs with leases not ended, and busiest, the busiest
// key's (the jobs without a key counting as one key); striped says the
// claim holds one stripe of the lock. 0 is a decline when the jobs asked
// for would let a key pass KeyLimit (whole lock) or the limits are too
// near for every stripe's share (striped), and otherwise means no free
// slot. A store that decides the rule in SQL (PostgreSQL) must agree.
func (q *FlowQuick) Allowed(live, busiest int, striped bool) int {
	if !striped && q.KeyLimit > 0 && busiest+q.Want+q.Extra > q.KeyLimit {
		return 0
	}
	g := q.Want + q.Extra
	if q.Limit > 0 {
		w := max(min(q.Want, q.Limit-live), 0)
		g = w + min(q.Extra, max(0, (q.Limit+1)/2-live-w))
	}
	if !striped {
		return g
	}
	s := q.Stripes
	for _, lim := range []struct{ limit, used int }{{q.Limit, live}, {q.KeyLimit, busiest}} {
		if lim.limit == 0 {
			continue
		}
		share := lim.limit / (2 * s)
		if lim.limit-lim.used < s*share {
			return 0
		}
		g = min(g, share)
	}
	return g
}

// FlowQuickResult is a FlowQuick claim a store decided itself: the jobs it
// took, in claim order, already committed.
type FlowQuickResult struct {
	Jobs []*JobRow
	// Striped is set when the store held a stripe of the lock
	// (FlowQuick.Stripes).
	Striped bool
}

// FlowTx is a flow-controlled claim in progress: one transaction that holds
// the queue's flow lock, so no other flow claim of the queue, in any process,
// runs between its reads and its takes. Its methods are the facts the flow
// controller decides on and the one write it makes.
type FlowTx interface {
	// FlowRunning reports the queue's running jobs by flow key, the store's
	// clock, and whether the queue is paused.
	FlowRunning(ctx context.Context) (*FlowRunning, error)
	// FlowKeys lists up to limit flow keys greater than after (in byte
	// order) that have pending jobs in the queue, ascending. Jobs without a
	// key are not listed.
	FlowKeys(ctx context.Context, after string, limit int) ([]string, error)
	// FlowRates returns the stored rate state of keys: the theoretical
	// arrival time of the next start (GCRA), by key; a key without one is
	// absent. "" is the bucket of jobs without a key.
	FlowRates(ctx context.Context, keys []string) (map[string]time.Time, error)
	// FlowTake claims jobs, as JobClaim would, from each FlowTake in turn.
	// final says the claim writes nothing after it: the store may commit
	// the transaction with it (the claim function then only returns).
	FlowTake(ctx context.Context, takes []FlowTake, final bool) ([]*JobRow, error)
	// FlowSaveRates stores rate states.
	FlowSaveRates(ctx context.Context, tats map[string]time.Time) error
}

// FlowRunning is what runs in a queue, by flow key ("" for jobs without
// one).
type FlowRunning struct {
	Now    time.Time // the store's clock
	Paused bool
	// Live counts running jobs whose lease has not ended: the slots in use.
	// A job of a killed worker stops counting when its lease ends.
	Live map[string]int
	// All counts every running job, lease ended or not (an ordered key's
	// job stays its head until rescue returns it).
	All map[string]int
	// Quick is the claim the store decided itself (JobClaimFlowParams.Quick);
	// nil when it did not. The transaction is then over: the claim function
	// only returns. Live is then read only under a per-key limit.
	Quick *FlowQuickResult
}

// FlowTake is one take of a flow-controlled claim.
type FlowTake struct {
	// Any takes due pending jobs of the queue whatever their key, in claim
	// order (priority, run_at, id).
	Any bool
	// Key is the flow key to take from; "" with Any unset takes jobs
	// without a key, from the first Window due pending jobs of the queue in
	// claim order (jobs without a key have no index of their own).
	Key    string
	Window int
	// Max is how many to take at most.
	Max int
	// Order, for a key (not for Any or jobs without a key): FlowOrderNone
	// takes in claim order; FlowOrderBlock takes the key's oldest pending
	// job (lowest id) if it is due, else nothing; FlowOrderStepAside takes
	// the key's oldest due pending job. The caller checks that the key has
	// no running job.
	Order FlowOrder
}

// FlowKeyUse is one flow key's current use in a queue.
type FlowKeyUse struct {
	Key     string `json:"key"` // "" for jobs without a key
	Running int    `json:"running"`
	Pending int    `json:"pending"`
	// RateTAT is the key's stored rate state (nil if none): its bucket is
	// full again at this time (the store's clock).
	RateTAT *time.Time `json:"rate_tat,omitempty"`
}

// QueueFlowUseParams asks for the current use of a queue's flow keys.
type QueueFlowUseParams struct {
	Queue string
	Limit int // at most this many keys, busiest first; 0: DefaultListLimit
}
