package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spoolq/spool/backend"
)

// probeWait is how long Listen waits for its own probe notification before
// it concludes that its subscription hears nothing.
const probeWait = 3 * time.Second

// Listen implements backend.Notifier on a connection of its own: a direct
// one to Options.ListenURL when set, else one taken from the pool. The
// connection is closed, not returned, when Listen ends: it may still be
// subscribed or mid-wait.
//
// Before it reports ready, Listen sends a probe notification through the
// pool and waits for it on its subscription: through a transaction pooler
// a LISTEN succeeds on whichever server connection ran it and then hears
// nothing, and the probe turns that silence into ErrNoWakeUps. Opened with
// spool_pooler=transaction and no ListenURL, Listen returns ErrNoWakeUps
// at once.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	if b.pooled && b.listenURL == "" {
		// Known without a probe, whose wait held a client's Start for
		// probeWait (a drain of 20,000 jobs through PgBouncer spent 3 of
		// its 4 s there).
		return fmt.Errorf("listen: %w: through a transaction pooler (%s=transaction) a LISTEN hears nothing: "+
			"give a direct connection with %s", backend.ErrNoWakeUps, PoolerParam, ListenURLParam)
	}
	conn, err := b.listenConn(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := b.probe(ctx, conn, onWake); err != nil {
		return err
	}
	// Claim floors rely on seeing every insert notification from here on.
	b.floors.listen(+1)
	defer b.floors.listen(-1)
	rl := newRelay(b)
	sendCtx, stopSend := context.WithCancel(ctx)
	defer stopSend()
	go rl.send(sendCtx)
	if err := rl.check(ctx, conn, nil); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// The waits and the relay's polls below run without a context of
	// their own: a context passed to pgx costs a goroutine (its watcher)
	// per call, and a deadline a timer besides, which at the relay's
	// thousand polls a second was a large part of its client's CPU. The
	// connection's read deadline ends a wait when the next poll is due,
	// and ctx's end sets it to now, which ends a wait or a poll under way.
	nc := conn.PgConn().Conn()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Now()) })
	defer stop()
	side := &listenSide{nc: nc}
	b.side.Store(side)
	defer func() {
		b.side.CompareAndSwap(side, nil)
		side.close()
	}()
	ready()
	for {
		if !time.Now().Before(rl.deadline()) {
			if err := rl.check(ctx, conn, nc); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("listen: %w", err)
			}
		}
		// Set before ctx is tested: a deadline ctx's end set first would
		// be overwritten, and the test sees that end.
		if err := nc.SetReadDeadline(rl.deadline()); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if reqs := side.arm(); reqs != nil {
			if err := side.run(ctx, conn, reqs); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("listen: %w", err)
			}
			continue
		}
		n, err := conn.WaitForNotification(context.Background())
		side.disarm()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue // the relay's poll is due
			}
			return fmt.Errorf("listen: %w", err)
		}
		switch {
		case b.deliver(n, onWake):
			rl.start(time.Now())
		case n.Payload == relayPayload:
			rl.heard(time.Now())
		}
	}
}

// listenConn opens Listen's connection.
func (b *Backend) listenConn(ctx context.Context) (*pgx.Conn, error) {
	if b.listenURL != "" {
		cfg, err := pgx.ParseConfig(b.listenURL)
		if err != nil {
			return nil, fmt.Errorf("%s does not parse: %w", ListenURLParam, err)
		}
		return pgx.ConnectConfig(ctx, cfg)
	}
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return pc.Hijack(), nil
}

// probe sends a notification of its own through the pool and waits for it
// on conn, delivering whatever else arrives meanwhile.
func (b *Backend) probe(ctx context.Context, conn *pgx.Conn, onWake func(backend.Wake)) error {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	payload := probePrefix + hex.EncodeToString(nonce[:])
	if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, b.channel, payload); err != nil {
		return fmt.Errorf("listen: send a probe notification: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case err == nil && n.Payload == payload:
			return nil
		case err == nil:
			b.deliver(n, onWake)
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return fmt.Errorf("listen: %w: the subscription did not hear its own probe notification within %s "+
				"(a LISTEN through a transaction pooler succeeds and hears nothing: give a direct connection with %s)",
				backend.ErrNoWakeUps, probeWait, ListenURLParam)
		default:
			return fmt.Errorf("listen: %w", err)
		}
	}
}

// deliver turns a notification into a wake-up, and reports whether it
// announced an insert from SQL (see relay). An insert's notification and a
// passed-on one are routable (backend.WakeRouter): their Route is a hash of
// the payload and the sending session's process id, the same in every
// listener.
func (b *Backend) deliver(n *pgconn.Notification, onWake func(backend.Wake)) (fromSQL bool) {
	payload := n.Payload
	if strings.HasPrefix(payload, probePrefix) {
		return false // another Listen's probe
	}
	if id, ok := strings.CutPrefix(payload, cancelPrefix); ok {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			onWake(backend.Wake{CancelledID: n})
		}
		return false
	}
	if payload == relayPayload {
		b.floors.resetAll()
		onWake(backend.Wake{})
		return false
	}
	if note, ok := strings.CutPrefix(payload, notePrefix); ok {
		onWake(backend.Wake{Note: note})
		return false
	}
	if rest, ok := strings.CutPrefix(payload, passPrefix); ok {
		hops, queue, _ := strings.Cut(rest, ":")
		if h, err := strconv.Atoi(hops); err == nil && queue != "" {
			onWake(backend.Wake{Queue: queue, Route: routeOf(n), Hops: h})
		}
		return false
	}
	payload, fromSQL = cutSQLMark(payload)
	queue, key, ok := parseInsertNotice(payload)
	if !ok {
		b.floors.reset(queue)
		onWake(backend.Wake{Queue: queue})
		return fromSQL
	}
	b.floors.lower(queue, key)
	w := backend.Wake{Queue: queue, Jobs: noticeIDs(payload)}
	if b.routeWakes {
		w.Route = routeOf(n)
		w.Window = windowOf(queue, key)
	}
	onWake(w)
	return fromSQL
}

// wakeWindow is the span of run times whose wake-ups share a Wake.Window:
// long against a claim's round trip (a claim out when a window ends may
// take the next window's first jobs, and that window's process then
// claims for nothing), short against a burst, which a window's one
// process meets alone until a full claim passes it on.
const wakeWindow = 20 * time.Millisecond

// windowOf is the Wake.Window of an insert notification for queue whose
// lowest key is key: the queue and the wakeWindow its run time falls in,
// the same in every listener.
func windowOf(queue string, key claimKey) uint64 {
	// key.runAt is the payload's microseconds less one (parseInsertNotice).
	return backend.RouteOf(queue, uint64((key.runAt.UnixMicro()+1)/wakeWindow.Microseconds()))
}

// routeOf is a notification's Route: its payload and its sender's process
// id.
func routeOf(n *pgconn.Notification) uint64 {
	return backend.RouteOf(n.Payload, uint64(n.PID))
}

// Announce implements backend.WakeRouter: a notification every listener
// hears, this one's included, sent on Listen's connection while it
// listens (listenSide).
func (b *Backend) Announce(ctx context.Context, note string) error {
	if err := b.notify(ctx, notePrefix+note); err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	return nil
}

// PassOn implements backend.WakeRouter.
func (b *Backend) PassOn(ctx context.Context, queue string, hops int) error {
	if err := b.notify(ctx, passPrefix+strconv.Itoa(hops)+":"+queue); err != nil {
		return fmt.Errorf("pass a wake-up on: %w", err)
	}
	return nil
}

// RoutesWakes implements backend.WakeRouter: true unless Options.WakeRouting
// is off.
func (b *Backend) RoutesWakes() bool { return b.routeWakes }

// cancelPrefix marks a cancel notification, probePrefix Listen's probe,
// notePrefix a WakeRouter note and passPrefix a passed-on wake-up
// ("pass:HOPS:QUEUE"); queue names cannot contain ':'.
const (
	cancelPrefix = "cancel:"
	probePrefix  = "probe:"
	notePrefix   = "note:"
	passPrefix   = "pass:"
)
