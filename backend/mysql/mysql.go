// Package mysql is Spool's MySQL and MariaDB backend, built on
// go-sql-driver/mysql through database/sql.
//
// Spool's tables (spool_jobs, spool_leader, spool_migrations) and the
// spool_enqueue procedure live in the database the URL names; statements
// qualify them with that database, so a caller's transaction on another
// database of the same server can still insert jobs. One Spool per database.
//
// Two claim strategies (see docs/mysql.md):
//   - pessimistic: SELECT … FOR UPDATE SKIP LOCKED of a batch in a short READ
//     COMMITTED transaction, then the claim UPDATE by primary key. Needs
//     MariaDB 10.6 or MySQL 8.0.1 or later.
//   - optimistic: read a window of candidates without locks, pick at random,
//     claim with an UPDATE checked against each row's fence (its version).
//
// StrategyAuto, the default, detects SKIP LOCKED at start-up and falls back to
// the optimistic strategy, with a logged notice, when the server lacks it.
//
// Deadlocks (1213) and lock wait timeouts (1205) in the backend's own
// transactions are retried inside it, a bounded number of times, and counted
// in Metrics. Inside a caller's transaction they cannot be retried (InnoDB
// rolled the caller's transaction back) and are returned.
//
// Transactions passed as backend.Tx must be a *sql.Tx, *sql.Conn or any value
// with database/sql's ExecContext, QueryContext and QueryRowContext (DBTX) on
// a connection to the same server.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/claimsize"
	"github.com/spoolq/spool/backend/wakehub"
)

// Claim strategies, as set in Options.ClaimStrategy or the spool_claim URL
// parameter.
const (
	// StrategyAuto uses StrategyPessimistic when the server supports SKIP
	// LOCKED and StrategyOptimistic otherwise.
	StrategyAuto = "auto"
	// StrategyPessimistic claims with SELECT … FOR UPDATE SKIP LOCKED.
	StrategyPessimistic = "pessimistic"
	// StrategyOptimistic claims with a fence-checked UPDATE of rows picked at
	// random from an unlocked read of the queue's head.
	StrategyOptimistic = "optimistic"
)

// URL query parameters read by Open (and removed before the rest go to the
// driver).
const (
	// ClaimParam selects the claim strategy: auto, pessimistic or optimistic.
	ClaimParam = "spool_claim"
	// WindowParam sets Options.ClaimWindow.
	WindowParam = "spool_claim_window"
	// MaxConnsParam sets the pool's maximum open connections (default 16).
	MaxConnsParam = "spool_max_conns"
	// ClaimLockParam sets Options.ClaimLock: queue or off.
	ClaimLockParam = "spool_claim_lock"
	// WakeRoutingParam sets Options.WakeRouting: on or off.
	WakeRoutingParam = "spool_wake_routing"
)

// Wake routing modes (Options.WakeRouting).
const (
	// WakeRoutingLooker has one process at a time look for new jobs, and
	// claim for them (the default): the holder of the looker's lease
	// (spool_looker).
	WakeRoutingLooker = "looker"
	// WakeRoutingOn has every process look for new jobs, and routes each
	// new job's wake-up to one process.
	WakeRoutingOn = "on"
	// WakeRoutingOff wakes every process for every new job.
	WakeRoutingOff = "off"
)

// Claim lock modes (Options.ClaimLock).
const (
	// ClaimLockQueue makes the pessimistic claims of a queue, from every
	// process, take their rows one at a time (the default).
	ClaimLockQueue = "queue"
	// ClaimLockOff lets them run side by side.
	ClaimLockOff = "off"
)

// DefaultClaimWindow is the optimistic strategy's window beyond the batch:
// it reads Max + DefaultClaimWindow candidates and picks Max of them, so that
// ten single-job claimers (the setting of the "Laravel queueing optimization" analysis) rarely collide.
const DefaultClaimWindow = 10

// ErrInvalidDatabase is returned for a database name outside the allowlist.
var ErrInvalidDatabase = errors.New("invalid database name")

// ErrNoSkipLocked is returned when the pessimistic strategy is requested
// from a server without SELECT … SKIP LOCKED.
var ErrNoSkipLocked = errors.New("server does not support SKIP LOCKED")

var databasePattern = regexp.MustCompile(`^[A-Za-z0-9_$-]{1,64}$`)

// ValidateDatabase checks a database name against the allowlist
// ^[A-Za-z0-9_$-]{1,64}$; names are quoted with backticks in SQL.
func ValidateDatabase(name string) error {
	if !databasePattern.MatchString(name) {
		return fmt.Errorf("%w: %q (want 1 to 64 of A-Z a-z 0-9 _ $ -)", ErrInvalidDatabase, name)
	}
	return nil
}

// DBTX is what the backend needs of a caller's connection or transaction.
// *sql.Tx, *sql.Conn and *sql.DB satisfy it.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Options configure the backend.
type Options struct {
	// ClaimStrategy is StrategyAuto, StrategyPessimistic or
	// StrategyOptimistic. Defaults to StrategyAuto.
	ClaimStrategy string
	// ClaimWindow is how many candidates beyond the batch the optimistic
	// strategy reads. Defaults to DefaultClaimWindow.
	ClaimWindow int
	// MaxConns caps the pool's open connections. Defaults to 16.
	MaxConns int
	// ClaimLock is ClaimLockQueue (the default) or ClaimLockOff. Under the
	// queue's claim lock (a row written first in the claim's transaction
	// and held to its commit) the pessimistic claims of a queue take their
	// rows one at a time; side by side, each steps over the rows the others
	// hold, and 8 processes' drains cost the server 2.7 times the CPU per
	// job of the same drains under the lock (BENCHMARKS.md, "Worker
	// processes: one claim at a time per queue"). The optimistic strategy
	// takes no lock.
	ClaimLock string
	// WakeRouting is WakeRoutingLooker (the default), WakeRoutingOn or
	// WakeRoutingOff. MySQL has no notifications: a process learns of the
	// jobs other processes insert by reading the ids above the last one
	// it saw, every few milliseconds while jobs come. Looker: one process
	// at a time reads them fast and claims for them, the holder of a
	// lease on the server's clock (spool_looker), held by a process with
	// an idle worker when there is one (backend.WakeDemand); the others
	// look now and then, and take the lease when it lapses. On: every
	// process reads them, and the wake-up for a new job goes to one of
	// the processes that work its queue (backend.WakeRouter; the
	// processes announce their queues through spool_wake_notes). Off:
	// every process reads them and claims for every new job it sees.
	WakeRouting string
	// Logger receives the backend's notices (the strategy chosen at
	// start-up). Defaults to slog.Default().
	Logger *slog.Logger

	// serverVersion overrides the detected server version (tests).
	serverVersion string
}

// Backend is the MySQL/MariaDB implementation of backend.Backend.
type Backend struct {
	db *sql.DB
	// kill kills on the server the statements whose context ended (kill.go).
	kill     *killer
	database string
	sql      queries
	server   serverInfo
	strategy string
	window   int
	// claimLock: pessimistic claims take the queue's claim lock first.
	claimLock bool
	// small: whether each queue's next pessimistic claim is expected to
	// be small, and so starts without the claim lock (claim.go).
	small smallClaims
	// routeWakes: Options.WakeRouting is on; looker: it is looker.
	routeWakes, looker bool
	// demands are the functions AddWakeDemand registered, queueSets the
	// queues AddWakeQueues registered (looker.go).
	demands   backend.WakeDemands
	queueSets backend.Registrations[[]string]
	// notesWritten counts the wake-up notes this backend wrote, and
	// noteSource names it in the notes it announces (listen.go).
	notesWritten atomic.Uint64
	noteSource   string
	// headsReads counts the heads Listen read (its looks), for the
	// tests of how often an idle process looks.
	headsReads atomic.Int64
	// claimsProbedEmpty counts the small claims a probe answered
	// (claim_due.sql found no due job), for the tests.
	claimsProbedEmpty atomic.Int64
	// listed holds the ids of new jobs Listen read, for the claims of
	// listed jobs (listed.go); claimsListed counts those claims, and
	// claimsListedTaken the claims not sent because this backend's own
	// claims had taken every job listed.
	listed            *listedJobs
	claimsListed      atomic.Int64
	claimsListedTaken atomic.Int64
	// claimsListedLocked counts the claims of listed jobs on MariaDB that
	// took them in a transaction, after the read and UPDATE without one
	// met a row another transaction holds (claimListedNoWait).
	claimsListedLocked atomic.Int64
	// noteLast is the last note announced, written at noteAt.
	noteMu   sync.Mutex
	noteLast string
	noteAt   time.Time
	logger   *slog.Logger
	metrics  metrics
	closed   atomic.Bool
	// released announces jobs this process's writes took out of waiting
	// to its own listeners (workflow.go).
	released *wakehub.Hub
}

var (
	_ backend.Backend       = (*Backend)(nil)
	_ backend.CancelWatcher = (*Backend)(nil)
	_ backend.Notifier      = (*Backend)(nil)
	_ backend.WakeRouter    = (*Backend)(nil)
	_ backend.WakeDemand    = (*Backend)(nil)
	_ backend.WakeQueues    = (*Backend)(nil)
)

// Open connects to the database at a mysql:// URL,
// mysql://user:password@host:port/database?params. The spool_claim,
// spool_claim_window, spool_claim_lock, spool_wake_routing and spool_max_conns parameters set Options; every other
// parameter goes to go-sql-driver/mysql (tls, timeout, …), except the
// settings the backend needs, which it always sets itself (see OpenConfig).
// The backend owns the pool and closes it.
func Open(ctx context.Context, dsn string) (*Backend, error) {
	cfg, opts, err := ParseURL(dsn)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	return OpenConfig(ctx, cfg, opts)
}

func init() {
	backend.Register(func(ctx context.Context, dsn string) (backend.Backend, error) {
		return Open(ctx, dsn)
	}, "mysql")
}

// OpenConfig connects with a driver configuration. The configuration is
// copied and the settings Spool relies on are forced on the copy: parseTime,
// UTC times, client-side interpolation of parameters, found-rows counts,
// utf8mb4, and for every session strict SQL mode, time_zone '+00:00' and
// READ COMMITTED. innodb_lock_wait_timeout defaults to 10 seconds unless
// cfg.Params sets it. cfg.DBName must name an existing database. The
// driver's own notices (a pooled connection found closed, say) go to
// opts.Logger with their cause, unless cfg.Logger is set. It tries once; a
// failure that may pass by itself (the server not running yet or
// restarting, out of connection slots, its name not resolvable yet)
// matches backend.ErrUnavailable, after which backend.Open tries again.
func OpenConfig(ctx context.Context, cfg *mysql.Config, opts *Options) (*Backend, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.ClaimStrategy == "" {
		o.ClaimStrategy = StrategyAuto
	}
	switch o.ClaimStrategy {
	case StrategyAuto, StrategyPessimistic, StrategyOptimistic:
	default:
		return nil, fmt.Errorf("open mysql: claim strategy %q (want auto, pessimistic or optimistic)", o.ClaimStrategy)
	}
	if o.ClaimWindow < 0 || o.ClaimWindow > 100000 {
		return nil, fmt.Errorf("open mysql: claim window %d is out of range 0..100000", o.ClaimWindow)
	}
	if o.ClaimWindow == 0 {
		o.ClaimWindow = DefaultClaimWindow
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	switch o.ClaimLock {
	case "", ClaimLockQueue, ClaimLockOff:
	default:
		return nil, fmt.Errorf("open mysql: claim lock %q (want queue or off)", o.ClaimLock)
	}
	switch o.WakeRouting {
	case "", WakeRoutingLooker, WakeRoutingOn, WakeRoutingOff:
	default:
		return nil, fmt.Errorf("open mysql: wake routing %q (want looker, on or off)", o.WakeRouting)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg = withDriverLogger(cfg, o.Logger)
	if err := ValidateDatabase(cfg.DBName); err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	info, err := probeServer(ctx, cfg, o.serverVersion)
	if err != nil {
		return nil, openError(err)
	}
	connector, err := mysql.NewConnector(sessionConfig(cfg, info))
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	// Statements whose context ends are killed on the server, from the
	// killer's connections (kill.go).
	kill := newKiller(connector)
	db := sql.OpenDB(killConnector{Connector: connector, kill: kill})
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(time.Hour)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, openError(err)
	}
	queries, err := buildQueries(quoteIdent(cfg.DBName))
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	b := &Backend{
		small:    smallClaims{Expect: claimsize.Expect{Max: smallClaimMax}},
		released: wakehub.New(),
		db:       db,
		kill:     kill,
		database: cfg.DBName,
		sql:      queries,
		server:   info,
		window:   o.ClaimWindow,
		logger:   o.Logger,
		// The lock only orders pessimistic claims; the optimistic
		// strategy's take no locks.
		claimLock:  o.ClaimLock != ClaimLockOff,
		routeWakes: o.WakeRouting == WakeRoutingOn,
		looker:     o.WakeRouting == "" || o.WakeRouting == WakeRoutingLooker,
		noteSource: newNoteSource(),
	}
	b.listed = newListedJobs(func(queue string) { b.released.Publish(backend.Wake{Queue: queue}) })
	b.strategy, err = chooseStrategy(o.ClaimStrategy, info, o.Logger)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	return b, nil
}

// chooseStrategy resolves StrategyAuto against the server, logging a notice
// when it has to fall back.
func chooseStrategy(want string, info serverInfo, logger *slog.Logger) (string, error) {
	switch {
	case want == StrategyOptimistic:
		return StrategyOptimistic, nil
	case info.skipLocked:
		return StrategyPessimistic, nil
	case want == StrategyPessimistic:
		return "", fmt.Errorf("%w: %s (needs MariaDB 10.6 or MySQL 8.0.1; use spool_claim=optimistic or auto)", ErrNoSkipLocked, info.version)
	}
	logger.Warn("spool: the MySQL server has no SELECT … SKIP LOCKED; claiming jobs with the optimistic strategy",
		"server_version", info.version, "strategy", StrategyOptimistic)
	return StrategyOptimistic, nil
}

// quoteIdent quotes a validated identifier with backticks.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// DB returns the pool the backend uses.
func (b *Backend) DB() *sql.DB { return b.db }

// Database returns the name of the database holding Spool's tables.
func (b *Backend) Database() string { return b.database }

// ClaimStrategy returns the strategy in use: StrategyPessimistic or
// StrategyOptimistic (StrategyAuto resolved at Open).
func (b *Backend) ClaimStrategy() string { return b.strategy }

// ServerVersion returns the server's version string as detected at Open.
func (b *Backend) ServerVersion() string { return b.server.version }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "mysql" }

// Close closes the pool. It is safe to call more than once.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	err := b.db.Close()
	if kerr := b.kill.db.Close(); err == nil {
		err = kerr
	}
	return err
}

// dbtx returns the executor for a caller's transaction, or nil for the pool.
func dbtx(tx backend.Tx) (DBTX, error) {
	if tx == nil {
		return nil, nil
	}
	if d, ok := tx.(DBTX); ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %T (want *sql.Tx or a value with ExecContext, QueryContext and QueryRowContext)", backend.ErrTxType, tx)
}
