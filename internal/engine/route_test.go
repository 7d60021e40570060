package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// noteBus is a WakeRouter that records what was sent.
type noteBus struct {
	mu     sync.Mutex
	notes  []string
	passes []string
}

func (b *noteBus) RoutesWakes() bool { return true }
func (b *noteBus) Announce(_ context.Context, note string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notes = append(b.notes, note)
	return nil
}
func (b *noteBus) PassOn(_ context.Context, queue string, hops int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.passes = append(b.passes, fmt.Sprintf("%s:%d", queue, hops))
	return nil
}

var _ backend.WakeRouter = (*noteBus)(nil)

// routers makes n routers that have heard each other's notes; the first
// half work queues a and b, the rest only a.
func routers(t *testing.T, n int, now time.Time) []*router {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rs := make([]*router, n)
	for i := range rs {
		qs := []string{"a", "b"}
		if i >= n/2 {
			qs = []string{"a"}
		}
		rs[i] = newRouter(&noteBus{}, fmt.Sprintf("client-%d", i), qs, logger)
		if rs[i] == nil {
			t.Fatal("newRouter refused a plain client id")
		}
	}
	for _, r := range rs {
		for _, o := range rs {
			r.heard(o.note(), now)
		}
	}
	return rs
}

// TestRouterOneAnswer checks that, for every routed wake-up, exactly one
// process among those that heard the same notes answers, that it works the
// wake-up's queue, and that the wake-ups spread over the processes.
func TestRouterOneAnswer(t *testing.T) {
	now := time.Now()
	rs := routers(t, 8, now)
	count := map[int]int{}
	for route := uint64(1); route <= 8000; route++ {
		for _, queue := range []string{"a", "b"} {
			answered := -1
			for i, r := range rs {
				mine, members := r.answers(queue, route*0x9e3779b97f4a7c15|1, 0, now)
				want := 8
				if queue == "b" {
					want = 4
				}
				if members != want {
					t.Fatalf("router %d counts %d members of queue %s, want %d", i, members, queue, want)
				}
				if mine && (queue == "a" || i < 4) {
					if answered >= 0 {
						t.Fatalf("wake-up %d of queue %s answered by routers %d and %d", route, queue, answered, i)
					}
					answered = i
				}
			}
			if answered < 0 {
				t.Fatalf("wake-up %d of queue %s answered by none", route, queue)
			}
			if queue == "b" && answered >= 4 {
				t.Fatalf("wake-up of queue b answered by router %d, which does not work it", answered)
			}
			if queue == "a" {
				count[answered]++
			}
		}
	}
	for i := range rs {
		// 8,000 wake-ups over 8 processes: 1,000 each on average.
		if count[i] < 800 || count[i] > 1200 {
			t.Errorf("router %d answered %d of 8000 wake-ups of queue a, want about 1000 (all: %v)", i, count[i], count)
		}
	}
}

// TestRouterFallsBack checks that a process whose own note has not come
// back answers every wake-up, that members unheard for memberTTL and
// members that left are no longer chosen, and that a process left alone
// answers everything.
func TestRouterFallsBack(t *testing.T) {
	now := time.Now()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := newRouter(&noteBus{}, "self", []string{"a"}, logger)
	for route := uint64(1); route < 100; route++ {
		if mine, _ := r.answers("a", route, 0, now); !mine {
			t.Fatal("a router that has not heard its own note must answer every wake-up")
		}
	}
	rs := routers(t, 4, now)
	later := now.Add(memberTTL + time.Millisecond)
	// Only router 0 keeps announcing: the others expire in its view.
	rs[0].heard(rs[0].note(), later)
	for route := uint64(1); route < 100; route++ {
		if mine, members := rs[0].answers("a", route, 0, later); !mine || members != 1 {
			t.Fatalf("alone after the others expired: answers %v with %d members, want true with 1", mine, members)
		}
	}
	// A leave removes a member at once.
	rs = routers(t, 2, now)
	rs[0].heard(noteLeave+noteSep+"client-1", now)
	for route := uint64(1); route < 100; route++ {
		if mine, _ := rs[0].answers("a", route, 0, now); !mine {
			t.Fatal("the only member left must answer every wake-up")
		}
	}
	if newRouter(&noteBus{}, "bad"+noteSep+"id", []string{"a"}, logger) != nil {
		t.Error("a client id holding the note separator must not route")
	}
}

// TestRouterPassOnBound checks that a wake-up is passed on at most once
// per other member.
func TestRouterPassOnBound(t *testing.T) {
	now := time.Now()
	rs := routers(t, 3, now)
	rs[0].heard(rs[0].note(), time.Now())
	for hops := 1; hops <= 4; hops++ {
		// 3 members: passed on twice, the wake-up has been at each.
		if got := rs[0].passOn("a", hops); got != (hops < 3) {
			t.Errorf("pass-on with %d hops: sent %v, want %v", hops, got, hops < 3)
		}
	}
}

// TestRouterWindows checks that when every member of a queue routes by
// windows, all the wake-ups of one window go to the same process, exactly
// one, whatever their Route, and windows spread over the processes; and
// that while one member of the queue does not (an earlier version, whose
// note lists no windowCap), every process routes by Route, as it does.
func TestRouterWindows(t *testing.T) {
	now := time.Now()
	rs := routers(t, 8, now)
	count := map[int]int{}
	for window := uint64(1); window <= 8000; window++ {
		w := window*0x9e3779b97f4a7c15 | 1
		first := -1
		for route := uint64(1); route <= 4; route++ {
			answered := -1
			for i, r := range rs {
				if mine, _ := r.answers("a", route*0xbf58476d1ce4e5b9|1, w, now); mine {
					if answered >= 0 {
						t.Fatalf("window %d answered by routers %d and %d", window, answered, i)
					}
					answered = i
				}
			}
			if answered < 0 {
				t.Fatalf("window %d answered by none", window)
			}
			if first >= 0 && answered != first {
				t.Fatalf("window %d answered by router %d for one route, %d for another", window, first, answered)
			}
			first = answered
		}
		count[first]++
	}
	for i := range rs {
		if count[i] < 800 || count[i] > 1200 {
			t.Errorf("router %d answered %d of 8000 windows, want about 1000 (all: %v)", i, count[i], count)
		}
	}

	// A member of an earlier version joins: its note lists the queues
	// alone.
	for _, r := range rs {
		r.heard(noteMember+noteSep+"old"+noteSep+"a", now)
	}
	for route := uint64(1); route <= 1000; route++ {
		rt := route*0xbf58476d1ce4e5b9 | 1
		for i, r := range rs {
			byRoute, _ := r.answers("a", rt, 0, now)
			if mine, _ := r.answers("a", rt, 12345, now); mine != byRoute {
				t.Fatalf("router %d with a member that does not route by windows: answers %v by window, %v by route", i, mine, byRoute)
			}
		}
	}
	// The capability is not read as a queue.
	if m := rs[0].members["client-1"]; m == nil || !m.windows || len(m.queues) != 2 {
		t.Fatalf("member client-1 read from its note as %+v, want queues a and b, routing by windows", m)
	}
}
