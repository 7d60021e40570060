package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// ClaimGate holds one claim in flight, as a reply slowed by load would be:
// a store wrapper calls Pass after each claim it has run, and once Hold has
// armed the gate, the next claim to pass signals Held and waits there
// until Release. Claims before Hold and after the held one pass at once.
type ClaimGate struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewClaimGate returns a gate that holds nothing until Hold.
func NewClaimGate() *ClaimGate {
	return &ClaimGate{held: make(chan struct{}), release: make(chan struct{})}
}

// Hold arms the gate for the next claim.
func (g *ClaimGate) Hold() { g.armed.Store(true) }

// Pass is called by the wrapper after each claim it ran, before returning
// its reply.
func (g *ClaimGate) Pass() {
	if g.armed.CompareAndSwap(true, false) {
		g.held <- struct{}{}
		<-g.release
	}
}

// Held receives once the armed claim has run and is held.
func (g *ClaimGate) Held() <-chan struct{} { return g.held }

// Release lets the held claim's reply go; later calls do nothing.
func (g *ClaimGate) Release() { g.once.Do(func() { close(g.release) }) }

// testResumeWithClaimInFlight checks that the jobs inserted while a queue
// was paused all run after its resume when a claim sent during the pause is
// still in flight across the resume, though the client polls only hourly.
// With four workers, one busy with a blocking job, that claim (held by a
// ClaimGate through Harness.HoldClaims) finds the queue paused; after the
// resume and the blocking job's end, a second claim, for the slot the first
// left unasked, takes one waiting job and comes back full; the held
// claim's empty reply then arrives, and must not make the client believe
// the queue empty. Another handle of the store (another process) pauses,
// inserts and resumes.
func testResumeWithClaimInFlight(t *testing.T, h Harness) {
	if h.HoldClaims == nil {
		t.Fatal("Harness.HoldClaims is nil: give the store's wrapper, or name ResumeWithClaimInFlight in Exceptions with the reason")
	}
	be := h.NewBackend(t)
	gate := NewClaimGate()
	worker, admin := h.HoldClaims(be, gate), h.Reopen(t, be)
	ctx := context.Background()
	ws, started, block := blockingWorkers()
	cfg := fastConfig(ws, 4)
	cfg.PollInterval = time.Hour
	c := newClient(t, worker, cfg)
	start(t, c)
	a := newClient(t, admin, &spool.Config{Logger: quietLogger(t)})
	// Cleanups run last first: the held claim and the blocking handler go
	// before the client's stop, which waits for them.
	var blockOnce sync.Once
	unblock := func() { blockOnce.Do(func() { close(block) }) }
	t.Cleanup(unblock)
	t.Cleanup(gate.Release)

	insert(t, a, NoteArgs{N: -1, Mode: "block"}, nil)
	if n := recv(t, started, "the blocking job to start"); n != -1 {
		t.Fatalf("job %d started, want the blocking one", n)
	}
	if err := a.QueuePause(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	gate.Hold()
	waiting := []int64{insert(t, a, NoteArgs{N: 0}, nil)}
	recv(t, gate.Held(), "a claim of the paused queue to be held")
	waiting = append(waiting, insert(t, a, NoteArgs{N: 1}, nil), insert(t, a, NoteArgs{N: 2}, nil))
	unblock() // its slot is the room the second claim asks for
	if err := a.QueueResume(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	// Which waiting job the second claim takes is the store's claim order
	// (a random pick, or another shard's job, on some stores); the other
	// two must follow once the held claim's reply is in.
	first := recv(t, started, "a waiting job to start after the resume")
	if first < 0 || first > 2 {
		t.Fatalf("job %d started, want one of the waiting jobs 0, 1, 2", first)
	}
	gate.Release() // the held claim's empty reply arrives after the second's
	seen := map[int]bool{first: true}
	for len(seen) < 3 {
		select {
		case n := <-started:
			if n < 0 || n > 2 || seen[n] {
				t.Fatalf("job %d started, want each of the waiting jobs 0, 1, 2 once", n)
			}
			seen[n] = true
		case <-time.After(15 * time.Second):
			for _, id := range waiting {
				j := getJob(t, worker, id)
				t.Logf("job %d: %s, attempt %d", id, j.State, j.Attempt)
			}
			t.Fatalf("of the waiting jobs only %v started within 15 s of the held claim's reply: its empty reply cleared the client's belief that jobs wait", seen)
		}
	}
}
