package postgres

import (
	"context"
	"sync"
)

// claimTurns gives a process's claims of a queue under the claim lock
// their turn one at a time, in the process, before they are sent. The
// claims of a queue under the lock take turns on the server anyway, each
// after the last one's commit; a second claim of the same process sent
// while its first waits there (a wake-up passed on by another process
// while the first was out) only queued behind it on the lock, holding a
// connection of its own: at 8 processes on one backlog, each pool then
// opened a third backend, which took its turns at claims and outcome
// writes with the others, building its plans and mapping the server's
// shared memory during the drain (docs/benchmarks/2026-12-02b.md).
type claimTurns struct {
	mu    sync.Mutex
	turns map[string]chan struct{} // by queue: holds a token while a claim has the turn
}

// take waits for queue's turn and returns the function that gives it
// back, or ctx's error.
func (t *claimTurns) take(ctx context.Context, queue string) (func(), error) {
	t.mu.Lock()
	if t.turns == nil {
		t.turns = map[string]chan struct{}{}
	}
	turn := t.turns[queue]
	if turn == nil {
		turn = make(chan struct{}, 1)
		t.turns[queue] = turn
	}
	t.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
