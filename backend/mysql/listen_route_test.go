package mysql_test

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestListenRoutesWakes: with wake routing on (not the default, the
// looker, which routes nothing), the wake-ups Listen
// delivers for other processes' inserts carry a Route, the same for the
// jobs of one queue whose ids are close; notes announced by any process
// and passed-on wake-ups (backend.WakeRouter) reach it; with routing
// off, an insert's wake-up carries none.
func TestListenRoutesWakes(t *testing.T) {
	t.Parallel()
	name := testdb.NewMySQLDatabase(t)
	on := url.Values{mysql.WakeRoutingParam: {mysql.WakeRoutingOn}}
	listener := openBackend(t, name, on)
	if err := listener.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	unrouted := openBackend(t, name, url.Values{mysql.WakeRoutingParam: {mysql.WakeRoutingOff}})
	other := openBackend(t, name, on)
	if looker := openBackend(t, name, nil); !listener.RoutesWakes() || unrouted.RoutesWakes() || looker.RoutesWakes() {
		t.Fatalf("RoutesWakes: %v with %s=on, %v with off, %v with the default (looker); want true, false, false",
			listener.RoutesWakes(), mysql.WakeRoutingParam, unrouted.RoutesWakes(), looker.RoutesWakes())
	}
	inserter, err := spool.NewClient(other, &spool.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen := func(be *mysql.Backend) <-chan backend.Wake {
		ready, wakes := make(chan struct{}), make(chan backend.Wake, 64)
		go func() {
			_ = be.Listen(ctx, func() { close(ready) }, func(w backend.Wake) { wakes <- w })
		}()
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			t.Fatal("Listen not ready in 10 s")
		}
		return wakes
	}
	routed, plain := listen(listener), listen(unrouted)
	next := func(wakes <-chan backend.Wake, what string, match func(backend.Wake) bool) backend.Wake {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case w := <-wakes:
				if match(w) {
					return w
				}
			case <-deadline:
				t.Fatalf("no %s within 5 s", what)
			}
		}
	}
	forQueue := func(q string) func(backend.Wake) bool {
		return func(w backend.Wake) bool { return w.Queue == q }
	}

	var (
		routes []uint64
		ids    []int64
	)
	for range 2 {
		res, err := inserter.Insert(ctx, noteArgs{}, &spool.InsertOpts{Queue: "routed"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
		w := next(routed, "wake-up for an insert", forQueue("routed"))
		if w.Route == 0 || w.Hops != 0 {
			t.Fatalf("wake-up %+v: want a Route and no hops", w)
		}
		routes = append(routes, w.Route)
		if w := next(plain, "unrouted wake-up for an insert", forQueue("routed")); w.Route != 0 {
			t.Fatalf("wake-up %+v with routing off: want no Route", w)
		}
	}
	// Ids of one span of 64 route alike (two jobs in a row straddle a
	// span's end once in 64 tests: nothing is said of those).
	if ids[0]/64 == ids[1]/64 && routes[0] != routes[1] {
		t.Fatalf("jobs %d and %d routed %x and %x: want one route", ids[0], ids[1], routes[0], routes[1])
	}

	if err := other.Announce(ctx, "member-note"); err != nil {
		t.Fatal(err)
	}
	next(routed, "announced note", func(w backend.Wake) bool { return w.Note == "member-note" })
	if err := other.PassOn(ctx, "passed", 2); err != nil {
		t.Fatal(err)
	}
	w := next(routed, "passed-on wake-up", forQueue("passed"))
	if w.Route == 0 || w.Hops != 2 {
		t.Fatalf("passed-on wake-up %+v: want a Route and 2 hops", w)
	}
	if w2 := next(plain, "passed-on wake-up in another listener", forQueue("passed")); w2.Route != w.Route || w2.Hops != 2 {
		t.Fatalf("passed-on wake-up %+v in one listener, %+v in another: want the same Route and hops", w, w2)
	}
}
