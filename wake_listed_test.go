package spool_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// listedBackend is a memory store whose wake-ups the test sends: the
// store's own wake-ups for a queue are dropped, and send delivers a
// wake-up that lists its jobs (backend.Wake.Jobs), as PostgreSQL's own
// inserts do. It counts the claims and those that came back empty, and
// holds the first claim after it ran while gate is set.
type listedBackend struct {
	*gatedBackend
	mu      sync.Mutex
	onWake  func(backend.Wake)
	ready   chan struct{}
	claims  int
	empties int
}

func newListed(t *testing.T) *listedBackend {
	return &listedBackend{gatedBackend: newGated(t), ready: make(chan struct{})}
}

func (l *listedBackend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := l.gatedBackend.JobClaim(ctx, p)
	l.mu.Lock()
	l.claims++
	if err == nil && len(rows) == 0 {
		l.empties++
	}
	l.mu.Unlock()
	return rows, err
}

func (l *listedBackend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return l.Backend.Listen(ctx, func() {
		l.mu.Lock()
		l.onWake = onWake
		l.mu.Unlock()
		ready()
		close(l.ready)
	}, func(w backend.Wake) {
		if w.Queue == "" {
			onWake(w) // every queue, a cancellation
		}
	})
}

// send delivers a wake-up of the default queue listing ids.
func (l *listedBackend) send(ids ...int64) {
	<-l.ready
	l.mu.Lock()
	onWake := l.onWake
	l.mu.Unlock()
	onWake(backend.Wake{Queue: spool.DefaultQueue, Jobs: ids})
}

func (l *listedBackend) counts() (claims, empties int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.claims, l.empties
}

// awaitRuns waits for n handler runs, failing the test if they do not come
// (the job would wait for the poll, an hour away).
func awaitRuns(t *testing.T, ran <-chan struct{}, n int, what string) {
	t.Helper()
	for i := range n {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: %d of %d jobs ran; the rest wait for the poll", what, i, n)
		}
	}
}

// inserter returns a function that inserts a job through a client of its
// own that works no queue, and returns the job's id.
func inserter(t *testing.T, be backend.Backend) func() int64 {
	t.Helper()
	c, err := spool.NewClient(be, &spool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return func() int64 {
		t.Helper()
		res, err := c.Insert(context.Background(), wakeArgs{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
}

// TestListedWakeTakenSendsNoClaim: a wake-up that lists jobs the
// producer's own claim took sends no claim, whether it arrives while that
// claim is out (its reply decides) or after it. Claimed for, it found
// nothing: with worker processes each woken for a job of its own, a third
// of their claims came back empty that way.
func TestListedWakeTakenSendsNoClaim(t *testing.T) {
	ctx := context.Background()
	be := newListed(t)
	insert := inserter(t, be)
	id1, id2 := insert(), insert()
	c, ran := startWakeClient(t, be, spool.QueueConfig{MaxWorkers: 4, Prefetch: -1})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(be.release) })
	<-be.claimed // the start's claim took both jobs; its reply is held
	be.send(id2) // while it is out
	releaseOnce.Do(func() { close(be.release) })
	awaitRuns(t, ran, 2, "the start's claim")
	be.send(id1, id2) // after its reply
	// A job no claim took yet is claimed for.
	id3 := insert()
	be.send(id3)
	awaitRuns(t, ran, 1, "a listed wake-up for a job not taken")
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if claims, empties := be.counts(); claims != 2 || empties != 0 {
		t.Fatalf("%d claims, %d of them empty; want 2 (the start's, job 3's), none empty", claims, empties)
	}
}

// TestListedWakeNotTakenIsClaimed: a wake-up that lists a job committed
// after the snapshot of the claim out when it arrived is claimed for once
// that claim's reply is in, not left to the poll.
func TestListedWakeNotTakenIsClaimed(t *testing.T) {
	be := newListed(t)
	insert := inserter(t, be)
	insert()
	_, ran := startWakeClient(t, be, spool.QueueConfig{MaxWorkers: 4, Prefetch: -1})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(be.release) })
	<-be.claimed // the start's claim took job 1; its reply is held
	be.send(insert(), insert())
	releaseOnce.Do(func() { close(be.release) })
	awaitRuns(t, ran, 3, "jobs 2 and 3, inserted after the claim out read the queue")
	if claims, empties := be.counts(); claims != 2 || empties != 0 {
		t.Fatalf("%d claims, %d of them empty; want 2, none empty", claims, empties)
	}
}
