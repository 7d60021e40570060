package mysql

import (
	"context"
	"log/slog"
	"time"
)

// OpenWithVersion is Open with the server's version string replaced, so
// tests can play a server without SKIP LOCKED.
func OpenWithVersion(ctx context.Context, dsn, version string, logger *slog.Logger) (*Backend, error) {
	cfg, opts, err := ParseURL(dsn)
	if err != nil {
		return nil, err
	}
	opts.serverVersion = version
	opts.Logger = logger
	return OpenConfig(ctx, cfg, opts)
}

// ParseVersion exposes parseVersion.
var ParseVersion = parseVersion

// SessionSQLMode is the SQL mode the backend's sessions use.
const SessionSQLMode = sqlMode

// MigrateTo applies the migrations up to version n, as an older release
// did, for tests of the upgrade path.
func (b *Backend) MigrateTo(ctx context.Context, n int) error { return b.migrate(ctx, n) }

// LookerName is the name under which the backend's Listen calls hold the
// looker's lease.
func (b *Backend) LookerName() string { return b.noteSource }

// WakeQueuesKey is the looker's set key of the queues registered with
// AddWakeQueues.
func (b *Backend) WakeQueuesKey() string { return b.wakeQueuesKey() }

// HeadsReads is how many times the backend's Listen calls read the heads
// (their looks).
func (b *Backend) HeadsReads() int64 { return b.headsReads.Load() }

// ClaimsProbedEmpty is how many claims the probe of an idle queue
// answered without a transaction.
func (b *Backend) ClaimsProbedEmpty() int64 { return b.claimsProbedEmpty.Load() }

// ClaimsListed is how many claims took listed jobs by id (listed.go).
func (b *Backend) ClaimsListed() int64 { return b.claimsListed.Load() }

// SetListedClock replaces the clock of the claims of listed jobs: now,
// and after, which arms the wake-up that sends a head claim (listed.go).
func (b *Backend) SetListedClock(now func() time.Time, after func(time.Duration, func())) {
	b.listed.now, b.listed.after = now, after
}

// KillCounts returns the KILL QUERY statements the backend sent for
// cancelled statements, and the statements whose connection it closed
// instead (kill.go).
func KillCounts(b *Backend) (kills, fallbacks uint64) {
	return b.kill.kills.Load(), b.kill.fallbacks.Load()
}

// IsMariaDB reports whether the server is MariaDB.
func (b *Backend) IsMariaDB() bool { return b.server.mariaDB }

// ClaimsListedLocked is how many claims of listed jobs took them in a
// transaction after the claim without one met a row another held.
func (b *Backend) ClaimsListedLocked() int64 { return b.claimsListedLocked.Load() }

// ListedCount is how many ids are listed for a queue's next claim.
func (b *Backend) ListedCount(queue string) int {
	b.listed.mu.Lock()
	defer b.listed.mu.Unlock()
	if q := b.listed.queues[queue]; q != nil {
		return len(q.ids)
	}
	return 0
}

// HoldClaimTurn takes the queue's turn among the backend's small claims,
// as a claim out would, and returns the function that gives it back;
// onWait is called when a claim begins to wait for that turn.
func (b *Backend) HoldClaimTurn(ctx context.Context, queue string, onWait func()) (release func(), err error) {
	b.small.onWait = func(q string) {
		if q == queue {
			onWait()
		}
	}
	return b.small.turn(ctx, queue)
}
