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
	if err := rl.check(ctx, conn); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ready()
	for {
		if !time.Now().Before(rl.deadline()) {
			if err := rl.check(ctx, conn); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("listen: %w", err)
			}
		}
		wctx, cancel := context.WithDeadline(ctx, rl.deadline())
		n, err := conn.WaitForNotification(wctx)
		due := wctx.Err() != nil
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if due {
				continue // the relay's poll is due
			}
			return fmt.Errorf("listen: %w", err)
		}
		if b.deliver(n.Payload, onWake) {
			rl.start(time.Now())
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
			b.deliver(n.Payload, onWake)
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

// deliver turns a notification's payload into a wake-up, and reports
// whether it announced an insert from SQL (see relay).
func (b *Backend) deliver(payload string, onWake func(backend.Wake)) (fromSQL bool) {
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
	payload, fromSQL = cutSQLMark(payload)
	queue, key, ok := parseInsertNotice(payload)
	if ok {
		b.floors.lower(queue, key)
	} else {
		b.floors.reset(queue)
	}
	onWake(backend.Wake{Queue: queue})
	return fromSQL
}

// cancelPrefix marks a cancel notification, probePrefix Listen's probe;
// queue names cannot contain ':'.
const (
	cancelPrefix = "cancel:"
	probePrefix  = "probe:"
)
