package maintenance_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/internal/maintenance"
)

// flakyElections fails every election while failing is set, and reports
// each call's outcome on calls.
type flakyElections struct {
	*memory.Backend
	failing atomic.Bool
	calls   chan error
	// lastWon is when the last election this client won was sent (Unix
	// nanoseconds): its term ends no earlier than that plus the term.
	lastWon atomic.Int64
}

var errUnreachable = errors.New("connection refused (simulated)")

func (f *flakyElections) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	var (
		ok  bool
		err error
	)
	if f.failing.Load() {
		err = errUnreachable
	} else {
		sent := time.Now()
		if ok, err = f.Backend.LeaderElect(ctx, p); ok && err == nil {
			f.lastWon.Store(sent.UnixNano())
		}
	}
	select {
	case f.calls <- err:
	default:
	}
	return ok, err
}

func startMaintainer(t *testing.T, be backend.Backend, id string) *maintenance.Maintainer {
	t.Helper()
	m := maintenance.New(be, maintenance.Config{ClientID: id, LeaseDuration: time.Second,
		RescueInterval: 100 * time.Millisecond, CleanupInterval: time.Hour}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return m
}

// awaitCall waits for the next election call and returns its error.
func awaitCall(t *testing.T, calls <-chan error) error {
	t.Helper()
	select {
	case err := <-calls:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no election within 10s")
		return nil
	}
}

// TestLeadershipSurvivesFailedRenewals: renewals that fail while the term
// is still valid keep the leadership (no other client can win before the
// term ends); once the term has ended with no renewal landed, the client
// no longer leads, and another one takes over.
func TestLeadershipSurvivesFailedRenewals(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	flaky := &flakyElections{Backend: store, calls: make(chan error, 64)}
	a := startMaintainer(t, flaky, "a")
	for awaitCall(t, flaky.calls) != nil || !a.Leading() {
	}

	flaky.failing.Store(true)
	for i := 0; i < 2; i++ {
		for awaitCall(t, flaky.calls) == nil {
		}
		if !a.Leading() {
			won := time.Unix(0, flaky.lastWon.Load())
			t.Fatalf("a failed renewal %s after the last won election (term 5s) ended the leadership", time.Since(won).Round(time.Millisecond))
		}
	}
	// The term is still the store's: a rival cannot win it.
	ok, err := store.LeaderElect(context.Background(), &backend.LeaderElectParams{Name: maintenance.LeaderName, ClientID: "b", TTL: 5 * time.Second})
	if err != nil || ok {
		t.Fatalf("a rival won the election during the term: %v %v", ok, err)
	}

	// Once the term has ended with every renewal failing, the client no
	// longer leads: the term's end is the bound itself, so the test waits
	// for it.
	time.Sleep(time.Until(time.Unix(0, flaky.lastWon.Load()).Add(5 * time.Second)))
	if a.Leading() {
		t.Fatal("still leading after the term of its last won election ended")
	}
	b := startMaintainer(t, store, "b")
	deadline := time.Now().Add(15 * time.Second)
	for !b.Leading() {
		if time.Now().After(deadline) {
			t.Fatal("no other client took over after the term ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.Leading() {
		t.Fatal("two clients lead")
	}
}
