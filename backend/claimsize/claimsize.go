// Package claimsize tells a SQL store whether a queue's next claim is
// expected to be small: a pickup of a few new jobs rather than a slice of a
// backlog. PostgreSQL gives such a claim a form that leaves its jobs in
// place; MariaDB lets it pass the queue's claim lock. Both guess the next
// claim from the last one that said something about the backlog.
package claimsize

import "sync"

// Expect records, per queue, whether its next claim is expected to be
// small: its last claim that said something about the queue's backlog took
// fewer than Max jobs. A claim that got all it asked for says nothing when
// it asked for fewer than Max (a producer with little room asks for few),
// so it leaves the expectation as it was. A queue not claimed from yet is
// not expected to be small: its first claim may meet a backlog. Expect is
// safe for concurrent use; it must not be copied after first use.
type Expect struct {
	// Max is the size from which a claim is not small.
	Max    int
	queues sync.Map // queue name → bool
}

// Small reports whether the queue's next claim is expected to be small.
func (e *Expect) Small(queue string) bool {
	v, _ := e.queues.Load(queue)
	small, _ := v.(bool)
	return small
}

// Claimed records a claim of the queue that committed, took n jobs and
// asked for up to asked.
func (e *Expect) Claimed(queue string, n, asked int) {
	if n >= asked && n < e.Max {
		return // full, of a small ask: the backlog may be larger
	}
	small := n < e.Max
	if was, ok := e.queues.Load(queue); !ok || was != small {
		e.queues.Store(queue, small)
	}
}
