// Package postgres is Spool's PostgreSQL backend, built on pgx v5.
//
// It claims jobs with one statement per batch (a materialised CTE with
// FOR UPDATE SKIP LOCKED over a partial index of pending rows), writes outcomes
// and heartbeats in one statement per batch over arrays, inserts with
// INSERT … SELECT FROM unnest or COPY, and wakes producers through LISTEN/NOTIFY
// (one notification per queue per statement).
//
// Transactions passed as backend.Tx must be a pgx.Tx, or any value with pgx's
// Exec, Query, QueryRow and CopyFrom methods (see DBTX).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/claimsize"
)

// DefaultSchema is the schema Spool's tables live in unless configured.
const DefaultSchema = "spool"

// SchemaParam is the URL query parameter that selects the schema in Open.
const SchemaParam = "spool_schema"

// Claim strategies, as set in Options.ClaimStrategy or the spool_claim URL
// parameter (the same name and values as the MySQL backend's).
const (
	// StrategyPessimistic claims with one statement locking the queue's head
	// with FOR UPDATE SKIP LOCKED. The default.
	StrategyPessimistic = "pessimistic"
	// StrategyOptimistic reads the queue's head without locks, picks at
	// random and claims with a fence-checked UPDATE (the optimistic locking of the "Laravel queueing optimization"
	// analysis); kept for
	// comparison with the MySQL backend (spool bench ordering).
	StrategyOptimistic = "optimistic"
)

// URL query parameters for connection poolers in Open.
const (
	// PoolerParam, set to "transaction", opens the backend through a pooler
	// in transaction mode (PgBouncer's pool_mode = transaction): no session
	// settings at connect, statements without named prepared statements,
	// and the server's own timeouts checked (see Open).
	PoolerParam = "spool_pooler"
	// ListenURLParam sets Options.ListenURL.
	ListenURLParam = "spool_listen_url"
)

// ErrPoolerTimeouts is returned by Open through a transaction pooler when
// the server does not apply the timeouts Spool relies on to every session.
var ErrPoolerTimeouts = errors.New("the server's own timeouts are off")

// URL query parameters that select the claim strategy in Open.
const (
	// ClaimParam sets Options.ClaimStrategy.
	ClaimParam = "spool_claim"
	// WindowParam sets Options.ClaimWindow.
	WindowParam = "spool_claim_window"
)

// DefaultClaimWindow is the optimistic strategy's window beyond the batch.
const DefaultClaimWindow = 10

// ErrInvalidSchema is returned for a schema name outside the allowlist.
var ErrInvalidSchema = errors.New("invalid schema name")

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateSchema checks a schema name against the allowlist
// ^[a-z_][a-z0-9_]{0,62}$ (lower case, so it never needs case folding).
func ValidateSchema(name string) error {
	if !schemaPattern.MatchString(name) {
		return fmt.Errorf("%w: %q (want 1 to 63 of a-z, 0-9, _, not starting with a digit)", ErrInvalidSchema, name)
	}
	return nil
}

// DBTX is what the backend needs of a connection or transaction. pgx.Tx,
// *pgx.Conn and *pgxpool.Pool all satisfy it.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// Options configure the backend.
type Options struct {
	// Schema holds Spool's tables. Defaults to "spool".
	Schema string
	// CopyThreshold is the batch size from which inserts that need no ids
	// use COPY instead of INSERT … SELECT FROM unnest. Defaults to 500.
	CopyThreshold int
	// ClaimStrategy is StrategyPessimistic or StrategyOptimistic. Defaults
	// to StrategyPessimistic.
	ClaimStrategy string
	// ClaimWindow is how many candidates beyond the batch the optimistic
	// strategy reads. Defaults to DefaultClaimWindow.
	ClaimWindow int
	// Wake is how inserts outside a caller's transaction wake workers:
	// WakeAfterCommit (the default), WakeAtCommit or WakeOff.
	Wake string
	// WakeGap, with WakeAfterCommit, is the least time between two of a
	// backend's wake-up statements (0, the default: none, each is sent as
	// soon as the one before has returned; at most MaxWakeGap). Inserts
	// committed within the gap share one notification per queue, which
	// saves the server and the workers a statement, a delivery and often
	// a claim each, for up to the gap of pickup latency in a stream of
	// inserts; an insert after a quiet spell is announced at once.
	WakeGap time.Duration
	// ListenURL, when set, is a postgres:// URL of a direct connection to
	// the same database for Listen (a transaction pooler cannot carry a
	// LISTEN). Without it Listen uses a connection of the pool.
	ListenURL string
	// ClaimCommit is ClaimCommitSync (the default: a claim's commit waits
	// for its WAL flush, so claims survive a crash and a job has at most
	// one live lease) or ClaimCommitAsync (it does not wait, which takes
	// about 3 ms from every pickup under a write load; a crash can then undo
	// the last claims, whose handlers run beside the jobs' next claims. Their
	// writes are rejected: fences carry an epoch that moves on after every
	// crash, so a lost claim's fence is below every later claim's).
	ClaimCommit string
	// Claims is ClaimsAuto (the default), ClaimsLeaseRows or ClaimsInPlace:
	// where claimed jobs are held while they run. A claim into lease rows
	// moves jobs without a unique key or a flow key out of spool_jobs into
	// rows of up to 64 jobs, which writes one row version a job fewer
	// (schema 12) but costs a claim and its finish about 300 µs more of
	// server time; in place, every claimed job's row is updated. ClaimsAuto
	// claims into lease rows unless the queue's last claim took fewer than
	// 32 jobs.
	Claims string
	// ClaimLock is ClaimLockQueue (the default: a queue's claims into
	// lease rows, from every process, take their rows one at a time, under
	// a transaction-scoped advisory lock taken in the claim's own round
	// trip and held through its commit; small claims in place run side by
	// side) or ClaimLockOff (every claim side by side, each stepping over
	// the rows the others hold). With 8 worker processes on a quiet
	// machine the lock took a drain from 0.68 to 0.82 of one process's
	// rate and its server CPU per job from 1.45 to 1.18 times one
	// process's, with pickup unchanged (BENCHMARKS.md, "The claim lock
	// for backlog claims only").
	ClaimLock string
	// WakeRouting is WakeRoutingOn (the default: each insert's wake-up is
	// answered by one of the processes working its queue, chosen alike by
	// every process, rather than by all of them; internal/engine/route.go)
	// or WakeRoutingOff.
	WakeRouting string
}

// Wake routing modes (Options.WakeRouting, the spool_wake_routing URL
// parameter).
const (
	WakeRoutingOn  = "on"
	WakeRoutingOff = "off"
	// WakeRoutingParam is the URL parameter that sets Options.WakeRouting.
	WakeRoutingParam = "spool_wake_routing"
)

// Claim lock modes (Options.ClaimLock, the spool_claim_lock URL parameter).
const (
	ClaimLockQueue = "queue"
	ClaimLockOff   = "off"
	// ClaimLockParam is the URL parameter that sets Options.ClaimLock.
	ClaimLockParam = "spool_claim_lock"
)

// Claim storage modes (Options.Claims, the spool_claims URL parameter).
const (
	ClaimsAuto      = "auto"
	ClaimsLeaseRows = "lease_rows"
	ClaimsInPlace   = "in_place"
	// ClaimsParam is the URL parameter that sets Options.Claims.
	ClaimsParam = "spool_claims"
)

// Claim commit modes (Options.ClaimCommit, the spool_claim_commit URL
// parameter).
const (
	ClaimCommitAsync = "async"
	ClaimCommitSync  = "sync"
	// ClaimCommitParam is the URL parameter that sets Options.ClaimCommit.
	ClaimCommitParam = "spool_claim_commit"
)

// Backend is the PostgreSQL implementation of backend.Backend.
type Backend struct {
	pool          *pgxpool.Pool
	ownsPool      bool
	schema        string
	channel       string
	sql           queries
	copyThreshold int
	strategy      string
	inPlace       bool // Options.Claims is ClaimsInPlace
	leaseRows     bool // Options.Claims is ClaimsLeaseRows
	claimLock     bool // Options.ClaimLock is not ClaimLockOff
	routeWakes    bool // Options.WakeRouting is WakeRoutingOn
	window        int
	floors        claimFloors
	claimTurns    claimTurns // the process's claims under the claim lock, one at a time
	// small: which queues' next claims take the small form, in place. A
	// claim that got all of a small ask says nothing about the backlog:
	// with 8 worker processes such claims had sent 3-18% of a drain's
	// jobs through the small form, which costs the server more per job
	// (BENCHMARKS.md, "Worker processes: claims that took all they asked
	// for").
	small      claimsize.Expect
	placed     placedJobs // the running jobs claimed in place
	dependents placedJobs // the running jobs claimed with dependents (workflow.go)
	// settleRate is the rows per finish (x settleRateUnit, plus one; 0:
	// none yet) that the last settling transaction on the pool wrote, to
	// size the next batch's first part (finishDependentsParts);
	// settleFirst and settleRows are firstSettlePart and settlePartRows
	// (tests set others).
	settleRate              atomic.Int64
	settleFirst, settleRows int
	// goneRecords are jobs deleted at their completion whose durable
	// records could not be deleted yet (recordsGone).
	goneMu      sync.Mutex
	goneRecords []int64
	// orphansAfter is where the sweep of orphaned steps and signals goes
	// on from (maintenance.go): the highest job id it looked at last.
	orphansMu    sync.Mutex
	orphansAfter int64
	wake         string
	waker        *waker // WakeAfterCommit's sender
	// inserting counts this backend's inserts outside a caller's
	// transaction in flight: one that starts alone may notify in its own
	// transaction (insert_wake_now.sql).
	inserting atomic.Int64
	// claimTx is the settings statement of a claim's transaction: the
	// planner settings, and with ClaimCommitAsync an asynchronous commit.
	// jobClaimTx is JobClaim's: claimTx on the generic plan
	// (claimPlanSettings).
	claimTx, jobClaimTx string
	listenURL           string
	// pooled is set by Open with spool_pooler=transaction: Listen
	// without ListenURL cannot hear anything.
	pooled bool
	// relayName (tests), when set, names Listen's relay in
	// spool_sql_relay; else a random name is drawn.
	relayName int64
	// relayPolls counts the polls of Listen's relays (tests).
	relayPolls atomic.Int64
	// relayLease and relayQuiet (tests), when set, replace sqlLease and
	// sqlQuiet for Listen's relay: a test whose relay must keep the time
	// however long its poll loop stalls on a loaded machine.
	relayLease, relayQuiet time.Duration
	// demands are the functions AddWakeDemand registered, read at every
	// relay poll.
	demands backend.WakeDemands
	// noRelay (tests) keeps Listen from relaying inserts from SQL, so that
	// each of them notifies.
	noRelay bool
	// side, while Listen listens, sends the routing notifications on its
	// connection (listenSide).
	side   atomic.Pointer[listenSide]
	probes sync.WaitGroup     // probes below claim floors in flight
	ctx    context.Context    // ends at Close
	cancel context.CancelFunc // ends ctx
}

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.Notifier   = (*Backend)(nil)
	_ backend.WakeRouter = (*Backend)(nil)
	_ backend.WakeDemand = (*Backend)(nil)
)

// New returns a backend over an existing pool, which the caller keeps owning.
func New(pool *pgxpool.Pool, opts *Options) (*Backend, error) {
	if pool == nil {
		return nil, errors.New("postgres backend: nil pool")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if err := ValidateSchema(o.Schema); err != nil {
		return nil, fmt.Errorf("postgres backend: %w", err)
	}
	if o.CopyThreshold <= 0 {
		o.CopyThreshold = 500
	}
	switch o.ClaimStrategy {
	case "":
		o.ClaimStrategy = StrategyPessimistic
	case StrategyPessimistic, StrategyOptimistic:
	default:
		return nil, fmt.Errorf("postgres backend: claim strategy %q (want pessimistic or optimistic)", o.ClaimStrategy)
	}
	if o.ClaimWindow < 0 || o.ClaimWindow > 100000 {
		return nil, fmt.Errorf("postgres backend: claim window %d is out of range 0..100000", o.ClaimWindow)
	}
	if o.ClaimWindow == 0 {
		o.ClaimWindow = DefaultClaimWindow
	}
	switch o.Wake {
	case "":
		o.Wake = WakeAfterCommit
	case WakeAfterCommit, WakeAtCommit, WakeOff:
	default:
		return nil, fmt.Errorf("postgres backend: wake %q (want after, commit or off)", o.Wake)
	}
	if o.WakeGap < 0 || o.WakeGap > MaxWakeGap {
		return nil, fmt.Errorf("postgres backend: wake gap %s is out of range 0..%s", o.WakeGap, MaxWakeGap)
	}
	if o.WakeGap > 0 && o.Wake != WakeAfterCommit {
		return nil, fmt.Errorf("postgres backend: a wake gap spaces the wake-ups sent after commit; wake %q sends none of those", o.Wake)
	}
	claimTx := claimSettings
	switch o.ClaimCommit {
	case ClaimCommitAsync:
		claimTx += `, set_config('synchronous_commit', 'off', true)`
	case "", ClaimCommitSync:
	default:
		return nil, fmt.Errorf("postgres backend: claim commit %q (want async or sync)", o.ClaimCommit)
	}
	switch o.Claims {
	case "", ClaimsAuto, ClaimsLeaseRows, ClaimsInPlace:
	default:
		return nil, fmt.Errorf("postgres backend: claims %q (want auto, lease_rows or in_place)", o.Claims)
	}
	switch o.ClaimLock {
	case "", ClaimLockQueue, ClaimLockOff:
	default:
		return nil, fmt.Errorf("postgres backend: claim lock %q (want queue or off)", o.ClaimLock)
	}
	switch o.WakeRouting {
	case "", WakeRoutingOn, WakeRoutingOff:
	default:
		return nil, fmt.Errorf("postgres backend: wake routing %q (want on or off)", o.WakeRouting)
	}
	b := &Backend{
		small:         claimsize.Expect{Max: smallClaimMax},
		settleFirst:   firstSettlePart,
		settleRows:    settlePartRows,
		claimLock:     o.ClaimLock != ClaimLockOff,
		routeWakes:    o.WakeRouting != WakeRoutingOff,
		inPlace:       o.Claims == ClaimsInPlace,
		leaseRows:     o.Claims == ClaimsLeaseRows,
		claimTx:       claimTx,
		jobClaimTx:    claimTx + claimPlanSettings,
		pool:          pool,
		schema:        o.Schema,
		channel:       "spool:" + o.Schema,
		copyThreshold: o.CopyThreshold,
		strategy:      o.ClaimStrategy,
		window:        o.ClaimWindow,
		wake:          o.Wake,
		listenURL:     o.ListenURL,
	}
	sql, err := buildQueries(pgx.Identifier{o.Schema}.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("postgres backend: %w", err)
	}
	b.sql = sql
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if b.wake == WakeAfterCommit {
		b.waker = newWaker(b, o.WakeGap)
		go b.waker.run(b.ctx)
	}
	return b, nil
}

// Open connects to the database at a postgres:// or postgresql:// URL with
// settings fit for a queue's own sessions: TCP keepalives, a TCP user timeout,
// statement and idle-in-transaction timeouts. The spool_schema query
// parameter selects the schema, spool_claim and spool_claim_window the claim
// strategy, spool_claims where claimed jobs are kept, spool_claim_lock
// whether claims of a queue take turns (Options.ClaimLock),
// spool_wake_routing whether wake-ups are routed (Options.WakeRouting), spool_wake the wake-up
// mode and spool_wake_gap the least time between wake-ups (Options.WakeGap),
// spool_pooler=transaction a connection through a transaction pooler and
// spool_listen_url a direct connection for Listen. The backend owns the pool
// and closes it. Open tries once; a failure that may pass by itself (the
// server not running yet or restarting, out of connection slots, its name
// not resolvable yet) matches backend.ErrUnavailable, after which
// backend.Open tries again.
func Open(ctx context.Context, dsn string) (*Backend, error) {
	params, dsn, err := extractParams(dsn, SchemaParam, ClaimParam, WindowParam, WakeParam, WakeGapParam, PoolerParam, ListenURLParam, ClaimCommitParam, ClaimsParam, ClaimLockParam, WakeRoutingParam)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	var wakeGap time.Duration
	if g := params[WakeGapParam]; g != "" {
		if wakeGap, err = time.ParseDuration(g); err != nil {
			return nil, fmt.Errorf("open postgres: %s=%q: want a duration such as 2ms", WakeGapParam, g)
		}
	}
	pooler := params[PoolerParam]
	if pooler != "" && pooler != "transaction" {
		return nil, fmt.Errorf("open postgres: %s=%q: want transaction (or leave it out for a direct connection)", PoolerParam, pooler)
	}
	window := 0
	if w := params[WindowParam]; w != "" {
		if window, err = strconv.Atoi(w); err != nil || window < 1 {
			return nil, fmt.Errorf("open postgres: %s=%q: want a positive integer", WindowParam, w)
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = 16
	}
	// Detect a peer gone silent on the client's side too.
	dialer := &net.Dialer{KeepAlive: 15 * time.Second, Timeout: 10 * time.Second}
	cfg.ConnConfig.DialFunc = dialer.DialContext
	rp := cfg.ConnConfig.RuntimeParams
	setDefault(rp, "application_name", "spool")
	if pooler != "" {
		// A transaction pooler refuses startup parameters it does not
		// track, and gives each transaction whichever server connection
		// is free: session settings cannot travel with the client, and a
		// statement parsed on one server connection can be bound on
		// another (pgx's describe modes send the two in separate round
		// trips; through PgBouncer 1.18 that failed with "bind message
		// supplies 2 parameters, but prepared statement "" requires 0").
		// The simple protocol sends each statement whole. The server's
		// own timeouts are checked instead of set (checkServerTimeouts).
		if !strings.Contains(dsn, "default_query_exec_mode") {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		}
	} else {
		// A session of Spool's own never holds a transaction open while it
		// thinks, so a long one is a half-dead client: let the server end
		// it and free its locks. Statements are short, except large COPYs.
		setDefault(rp, "idle_in_transaction_session_timeout", "60000")
		setDefault(rp, "statement_timeout", "300000")
		// Spool's statements are short; compiling one with JIT takes longer
		// than running it (see claimSettings).
		setDefault(rp, "jit", "off")
		// Detect a peer gone silent: keepalives on an idle socket, and a
		// bound on unacknowledged writes (server side: tcp_user_timeout,
		// milliseconds).
		setDefault(rp, "tcp_keepalives_idle", "30")
		setDefault(rp, "tcp_keepalives_interval", "10")
		setDefault(rp, "tcp_keepalives_count", "3")
		setDefault(rp, "tcp_user_timeout", "60000")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if pooler != "" {
		err = checkServerTimeouts(ctx, pool)
	} else {
		err = pool.Ping(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, openError(err)
	}
	b, err := New(pool, &Options{Schema: params[SchemaParam], ClaimStrategy: params[ClaimParam], ClaimWindow: window,
		Wake: params[WakeParam], WakeGap: wakeGap, ListenURL: params[ListenURLParam], ClaimCommit: params[ClaimCommitParam], Claims: params[ClaimsParam],
		ClaimLock: params[ClaimLockParam], WakeRouting: params[WakeRoutingParam]})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	b.ownsPool = true
	b.pooled = pooler != ""
	return b, nil
}

// checkServerTimeouts is Open's check through a transaction pooler: Spool
// cannot set its timeouts per session there, so the server must apply them
// to every session itself (for the role or the database), or Open refuses
// with ErrPoolerTimeouts: a session a dead client left idle in a
// transaction would otherwise hold its locks forever.
func checkServerTimeouts(ctx context.Context, pool *pgxpool.Pool) error {
	var idle, stmt string
	err := pool.QueryRow(ctx, `SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('statement_timeout')`).Scan(&idle, &stmt)
	if err == nil && (idle == "0" || stmt == "0") {
		err = fmt.Errorf("%w: idle_in_transaction_session_timeout is %s and statement_timeout %s; through a transaction pooler "+
			"Spool cannot set them per session, so set them for the role it connects as, e.g. "+
			"ALTER ROLE name SET idle_in_transaction_session_timeout = '60s'; ALTER ROLE name SET statement_timeout = '5min'",
			ErrPoolerTimeouts, idle, stmt)
	}
	if err != nil {
		return fmt.Errorf("through a transaction pooler: %w", err)
	}
	return nil
}

func init() {
	backend.Register(func(ctx context.Context, dsn string) (backend.Backend, error) {
		return Open(ctx, dsn)
	}, "postgres", "postgresql")
}

func setDefault(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// extractParams removes query parameters from a URL DSN and returns their
// values by name ("" for one not given).
func extractParams(dsn string, names ...string) (map[string]string, string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, "", errors.New("database URL does not parse")
	}
	q := u.Query()
	out := make(map[string]string, len(names))
	for _, name := range names {
		out[name] = q.Get(name)
		q.Del(name)
	}
	u.RawQuery = EncodeQuery(q)
	return out, u.String(), nil
}

// EncodeQuery encodes q for a PostgreSQL URL: as url.Values.Encode, but a
// space as %20, since PostgreSQL's URL form (libpq's, pgx's) takes '+'
// literally: options=-c%20a%3Db must reach the server as "-c a=b". A '+'
// of a value itself is encoded as %2B either way.
func EncodeQuery(q url.Values) string {
	return strings.ReplaceAll(q.Encode(), "+", "%20")
}

// Pool returns the pool the backend uses.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// ClaimStrategy returns the claim strategy in use.
func (b *Backend) ClaimStrategy() string { return b.strategy }

// Schema returns the schema name.
func (b *Backend) Schema() string { return b.schema }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "postgres" }

// Close closes the pool if Open created it.
func (b *Backend) Close() error {
	b.cancel()
	if b.waker != nil {
		<-b.waker.done // sends the wake-ups still pending
	}
	b.probes.Wait()
	if b.ownsPool {
		b.pool.Close()
	}
	return nil
}

// dbtx returns the executor for a caller's transaction, or the pool.
func (b *Backend) dbtx(tx backend.Tx) (DBTX, error) {
	if tx == nil {
		return b.pool, nil
	}
	if d, ok := tx.(DBTX); ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %T (want pgx.Tx or a value with pgx's Exec, Query, QueryRow and CopyFrom)", backend.ErrTxType, tx)
}
