package spool

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/flow"
)

// Flow is a queue's flow control: limits on how many of its jobs run and
// start, and how claims share the queue among flow keys. The rules are
// enforced where jobs are claimed, in one transaction that holds the queue's
// flow lock, so they hold across every process working the queue; every
// process working a queue must give it the same Flow. See docs/flow.md.
//
// A job's flow key comes from InsertOpts.FlowKey or, when that is empty,
// from its args' FlowKey method (JobArgsWithFlowKey). Jobs without a key
// share one key of their own ("").
type Flow struct {
	// GlobalLimit is the most jobs of the queue running at once across all
	// processes (0: no limit beyond each process's MaxWorkers). A job counts
	// from its claim until its outcome is written or its lease ends, so the
	// slots of a killed worker come back when its leases end.
	GlobalLimit int
	// KeyLimit is the most jobs of one flow key running at once (0: none).
	KeyLimit int
	// Order runs each key's jobs one at a time, in insert order.
	Order FlowOrder
	// Rate limits each key's starts (nil: none).
	Rate *RateLimit
	// FairShare shares each claim among the flow keys that have jobs by
	// weighted round-robin (Weights; 1 for keys not listed), so a key with
	// a huge backlog delays another key's jobs by at most about one claim.
	// Any per-key rule (KeyLimit, Order, Rate) shares claims this way too,
	// with equal weights unless FairShare and Weights say otherwise.
	FairShare bool
	// Weights are flow keys' weights under FairShare, 1 to 1,000.
	Weights map[string]int
}

// FlowOrder is how a queue orders each flow key's jobs.
type FlowOrder = backend.FlowOrder

// Orders of a flow key's jobs (Flow.Order).
const (
	// FlowUnordered runs a key's jobs as the limits allow, in claim order.
	FlowUnordered = backend.FlowOrderNone
	// FlowOrderBlock runs a key's jobs one at a time in insert order; a job
	// waiting for a retry (or a delayed job) blocks its key's later jobs
	// until it completes, is discarded or is cancelled.
	FlowOrderBlock = backend.FlowOrderBlock
	// FlowOrderStepAside runs a key's jobs one at a time in insert order,
	// but a job that is not due (waiting for a retry, or delayed) lets the
	// key's later jobs run meanwhile; it runs next once due.
	FlowOrderStepAside = backend.FlowOrderStepAside
)

// RateLimit allows at most Limit starts of one flow key in any window of
// length Per, across all processes (a start is a claim). Starts are spread
// evenly, at most Burst at once; the long-run rate is (Limit-Burst+1) per
// Per, so a larger Burst lets claims take more per batch at the price of a
// lower average.
type RateLimit struct {
	Limit int
	Per   time.Duration
	// Burst is 1 to Limit; 0 takes Limit/10 (at least 1).
	Burst int
}

// JobArgsWithFlowKey is implemented by args types whose jobs take their flow
// key from their args: the kind's rule for its key.
type JobArgsWithFlowKey interface {
	JobArgs
	FlowKey() string
}

// FlowKeyUse is one flow key's current use in a queue.
type FlowKeyUse = backend.FlowKeyUse

// Limits of flow settings.
const (
	maxFlowLimit  = 1_000_000
	maxFlowWeight = 1000
)

// checkFlow validates a queue's Flow and returns the engine's rules (nil
// for no flow control).
func checkFlow(f *Flow) (*flow.Rules, error) {
	if f == nil {
		return nil, nil
	}
	switch {
	case f.GlobalLimit < 0 || f.GlobalLimit > maxFlowLimit:
		return nil, fmt.Errorf("GlobalLimit %d is out of range 0..%d", f.GlobalLimit, maxFlowLimit)
	case f.KeyLimit < 0 || f.KeyLimit > maxFlowLimit:
		return nil, fmt.Errorf("KeyLimit %d is out of range 0..%d", f.KeyLimit, maxFlowLimit)
	case f.Order > FlowOrderStepAside:
		return nil, fmt.Errorf("unknown Order %d", f.Order)
	case f.Order != FlowUnordered && f.KeyLimit > 1:
		return nil, fmt.Errorf("KeyLimit %d with Order: ordered keys run one job at a time", f.KeyLimit)
	case len(f.Weights) > 0 && !f.FairShare:
		return nil, fmt.Errorf("Weights without FairShare")
	}
	r := &flow.Rules{GlobalLimit: f.GlobalLimit, KeyLimit: f.KeyLimit, Order: f.Order, FairShare: f.FairShare}
	for k, w := range f.Weights {
		if err := checkFlowKey(k); err != nil {
			return nil, fmt.Errorf("Weights: %v", err)
		}
		if w < 1 || w > maxFlowWeight {
			return nil, fmt.Errorf("weight %d of key %q is out of range 1..%d", w, k, maxFlowWeight)
		}
	}
	r.Weights = f.Weights
	if rl := f.Rate; rl != nil {
		burst := rl.Burst
		if burst == 0 {
			burst = max(rl.Limit/10, 1)
		}
		switch {
		case rl.Limit < 1 || rl.Limit > maxFlowLimit:
			return nil, fmt.Errorf("Rate.Limit %d is out of range 1..%d", rl.Limit, maxFlowLimit)
		case rl.Per < time.Millisecond || rl.Per > 30*24*time.Hour:
			return nil, fmt.Errorf("Rate.Per %s is out of range 1ms..720h", rl.Per)
		case burst < 1 || burst > rl.Limit:
			return nil, fmt.Errorf("Rate.Burst %d is out of range 1..Limit (%d)", rl.Burst, rl.Limit)
		}
		r.Rate = flow.Rate{Limit: rl.Limit, Per: rl.Per, Burst: burst}
	}
	if r.GlobalLimit == 0 && !r.Keyed() {
		return nil, fmt.Errorf("empty Flow: set a limit, a rate, an order or FairShare")
	}
	return r, nil
}

// checkFlowKey checks a flow key: 1 to 255 bytes of printable UTF-8.
func checkFlowKey(k string) error {
	if k == "" || len(k) > backend.FlowKeyMaxLen || !utf8.ValidString(k) || !printable(k) {
		return fmt.Errorf("flow key %q must be 1 to %d bytes of printable UTF-8", k, backend.FlowKeyMaxLen)
	}
	return nil
}

// FlowKeys reports the current use of a queue's flow keys, busiest first:
// running jobs (leases not ended), pending jobs and the rate state. At most
// limit keys (0: 100).
func (c *Client) FlowKeys(ctx context.Context, queue string, limit int) ([]FlowKeyUse, error) {
	if err := ValidateQueueName(queue); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("flow keys: %w: negative limit", ErrInvalidConfig)
	}
	return c.backend.QueueFlowUse(ctx, &backend.QueueFlowUseParams{Queue: queue, Limit: limit})
}
