package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listenSide runs the process's wake-routing notifications (Announce's
// notes, PassOn's passes) on Listen's connection, between its waits,
// instead of on a pool connection. A note goes out every second from every
// process; sent through the pool while the claims and the outcome writes
// hold a connection each, it made the pool open a third, which then took
// its turn at claims and outcome writes like the others: one more backend
// a process that builds its plans and maps the server's shared memory
// while a scale-out's first drain runs (docs/internals-postgres.md,
// "Wake-up").
type listenSide struct {
	nc net.Conn // Listen's connection, whose read deadline ends a wait
	mu sync.Mutex
	// waiting is set while Listen waits for a notification, the only time
	// a request may end the wait by the read deadline: during a statement
	// it would break the statement.
	waiting bool
	closed  bool
	reqs    []*sideCall
}

// sideCall is a statement to run on Listen's connection; done gets its
// outcome.
type sideCall struct {
	run  func(conn *pgx.Conn) error
	done chan error
}

// errSideClosed says Listen ended before it ran a call: the caller runs
// it through the pool instead.
var errSideClosed = errors.New("listen ended")

// submit queues a call and wakes Listen's wait; false when Listen has
// ended.
func (s *listenSide) submit(run func(*pgx.Conn) error) (*sideCall, bool) {
	r := &sideCall{run: run, done: make(chan error, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.reqs = append(s.reqs, r)
	if s.waiting {
		_ = s.nc.SetReadDeadline(time.Now())
	}
	return r, true
}

// arm is called by Listen once its wait's deadline is set: it returns the
// requests queued, or, with none, marks the wait begun.
func (s *listenSide) arm() []*sideCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) > 0 {
		reqs := s.reqs
		s.reqs = nil
		return reqs
	}
	s.waiting = true
	return nil
}

// disarm is called by Listen when its wait has ended.
func (s *listenSide) disarm() {
	s.mu.Lock()
	s.waiting = false
	s.mu.Unlock()
}

// close fails the requests still queued, which then go through the pool,
// and refuses new ones.
func (s *listenSide) close() {
	s.mu.Lock()
	reqs := s.reqs
	s.reqs, s.closed = nil, true
	s.mu.Unlock()
	for _, r := range reqs {
		r.done <- errSideClosed
	}
}

// run runs reqs on conn, Listen's connection, with no read deadline (ctx's
// end still sets one). A call's error goes to its caller; one that leaves
// the connection closed ends Listen, and the calls not run go through the
// pool.
func (s *listenSide) run(ctx context.Context, conn *pgx.Conn, reqs []*sideCall) error {
	if err := s.nc.SetReadDeadline(time.Time{}); err != nil {
		for _, r := range reqs {
			r.done <- errSideClosed
		}
		return err
	}
	var failed error
	for _, r := range reqs {
		if failed != nil || ctx.Err() != nil {
			r.done <- errSideClosed
			continue
		}
		err := r.run(conn)
		if err == nil && conn.PgConn().TxStatus() != 'I' {
			err = errors.New("a statement on the listening connection left a transaction open")
		}
		if err != nil && !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			// A failed statement of an explicit transaction leaves it
			// aborted: end it, or the connection hears nothing more.
			if _, rerr := conn.Exec(context.Background(), "ROLLBACK"); rerr != nil {
				_ = conn.Close(context.Background())
			}
		}
		if err != nil && conn.IsClosed() {
			failed = fmt.Errorf("a statement on the listening connection: %w", err)
			r.done <- errSideClosed
			continue
		}
		r.done <- err
	}
	return failed
}

// onSide runs fn on Listen's connection while one listens, else on a
// connection of the pool. fn gets no context: a context passed to pgx on
// Listen's connection would cancel a statement by closing it; ctx bounds
// only the wait for the result.
func (b *Backend) onSide(ctx context.Context, fn func(ctx context.Context, conn sideQuerier) error) error {
	if s := b.side.Load(); s != nil {
		if r, ok := s.submit(func(conn *pgx.Conn) error { return fn(context.Background(), conn) }); ok {
			select {
			case err := <-r.done:
				if !errors.Is(err, errSideClosed) {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return fn(ctx, b.pool)
}

// sideQuerier is what onSide's calls run on: Listen's connection or the
// pool.
type sideQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// notify sends payload on the backend's channel: on Listen's connection
// while one listens, else through the pool.
func (b *Backend) notify(ctx context.Context, payload string) error {
	return b.onSide(ctx, func(ctx context.Context, conn sideQuerier) error {
		_, err := conn.Exec(ctx, `SELECT pg_notify($1, $2)`, b.channel, payload)
		return err
	})
}
