package spool

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Config configures a Client. Zero values take the documented defaults.
type Config struct {
	// AllowUnknownKinds lets Insert accept kinds that have no registered
	// worker (another process may work them). Insert-only clients (Workers
	// nil) never check kinds. Defaults to false.
	AllowUnknownKinds bool
	// CancelledRetention is how long cancelled jobs are kept. Negative keeps
	// them forever. Defaults to 7 days.
	CancelledRetention time.Duration
	// CleanupInterval is how often the leader deletes jobs past retention.
	// Defaults to 1 minute.
	CleanupInterval time.Duration
	// ClientID names this client in leases and leader election. Defaults to
	// hostname-pid-random.
	ClientID string
	// CompletedRetention is how long completed jobs are kept. Negative deletes
	// them as they complete (the fastest setting). Defaults to 24 hours.
	CompletedRetention time.Duration
	// CompletionBatchMax caps how many outcomes one write carries. Defaults
	// to 2000.
	CompletionBatchMax int
	// CompletionDelay is how long the outcome writer waits after an outcome to
	// collect more before writing. 0 writes as soon as the previous write has
	// finished, which already batches under load. Defaults to 0.
	CompletionDelay time.Duration
	// DiscardedRetention is how long discarded jobs are kept. Negative keeps
	// them forever. Defaults to 7 days.
	DiscardedRetention time.Duration
	// JobTimeout bounds each run; the handler's context is cancelled after it.
	// Negative means no timeout. A worker may override it per job. Defaults to
	// 1 minute.
	JobTimeout time.Duration
	// LeaseDuration is how long a claim holds a job without a heartbeat.
	// Running jobs heartbeat every third of it; a crashed worker's jobs run
	// again about this long after it stopped. Defaults to 30 seconds.
	LeaseDuration time.Duration
	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Observers receive the client's measurements (inserts, claims, starts,
	// outcomes, lost leases, rescues, the notifier's state) as they are
	// made: the hooks of the metrics and tracing modules (Observer).
	Observers []Observer
	// MaxArgsBytes limits a job's encoded args. Defaults to 1 MiB.
	MaxArgsBytes int
	// PollInterval is how often producers look for jobs without a wake-up
	// (delayed jobs, retries, inserts from elsewhere when LISTEN is off).
	// Defaults to 1 second.
	PollInterval time.Duration
	// FlowPollInterval is how soon a queue whose Flow held jobs back (a
	// limit reached, a key's order or rate) looks again when nothing in
	// this process frees a slot first: slots freed in other processes and
	// rate tokens are found this way. Defaults to 50ms.
	FlowPollInterval time.Duration
	// AwaitPoll is how often a client that has an Await or a SubscribeAll
	// waiting reads the jobs finished in every process since its last read
	// (one indexed read, shared by all of them; none while nobody waits).
	// Defaults to 50ms.
	AwaitPoll time.Duration
	// AnnounceFinishes makes this client tell the store's listeners, in
	// every process, of the jobs its outcomes finished, once per batch of
	// outcomes, where the store needs it (backend.FinishAnnouncer:
	// PostgreSQL, by a NOTIFY on a channel of its own): set it on the
	// clients that run jobs that other processes Await, so that those
	// return within milliseconds rather than at their next read
	// (AwaitPoll). It costs one statement per batch of outcomes; off, a
	// finish costs nothing extra. Defaults to false.
	AnnounceFinishes bool
	// PollOnly disables push wake-ups (LISTEN/NOTIFY), for connection poolers
	// in transaction mode. Defaults to false.
	PollOnly bool
	// Queues to work, by name, with their concurrency. Required to Start.
	Queues map[string]QueueConfig
	// RescueInterval is how often the leader returns jobs whose lease expired.
	// Defaults to a third of LeaseDuration.
	RescueInterval time.Duration
	// RetryPolicy computes backoffs after failures. Defaults to
	// DefaultRetryPolicy.
	RetryPolicy RetryPolicy
	// Workers registry. Required to Start.
	Workers *Workers
	// WorkMiddleware wraps every handler run of this client; see
	// WorkMiddleware.
	WorkMiddleware []WorkMiddleware
	// InsertMiddleware wraps every insert through this client; see
	// InsertMiddleware.
	InsertMiddleware []InsertMiddleware
	// PeriodicJobs are inserted on their schedules by the elected leader
	// among the clients of the store (see PeriodicJob). Every client may
	// list them; only the leader fires. In a client with Workers, NewClient
	// refuses a periodic job whose kind (that of its Args for the next
	// slot) has no worker, as Insert would at every slot, unless
	// AllowUnknownKinds is set; a client without Workers never fires them.
	PeriodicJobs []PeriodicJob
}

// QueueConfig configures one queue.
type QueueConfig struct {
	// MaxWorkers is how many jobs of the queue run at once, 1 to 10,000.
	MaxWorkers int
	// Prefetch is how many claimed jobs may wait locally for a free worker,
	// so that workers rarely wait for the database. The producer refills when
	// the local buffer falls to half of it. Negative disables prefetch.
	// Defaults to MaxWorkers. Under a Flow, prefetched jobs count against
	// the limits, so they are taken only from the lower half of a limit's
	// slots, and not at all under a rate or an order (docs/flow.md).
	Prefetch int
	// Flow limits how many of the queue's jobs run and start across all
	// processes, and shares claims among flow keys (nil: no flow control).
	Flow *Flow
}

const maxQueueWorkers = 10000

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	for i, o := range c.Observers {
		if o == nil {
			return bad("Observers[%d] is nil", i)
		}
	}
	if err := checkPeriodic(c.PeriodicJobs); err != nil {
		return bad("%v", err)
	}
	if err := checkPeriodicKinds(c, time.Now()); err != nil {
		return Config{}, err
	}
	def(&c.CancelledRetention, 7*24*time.Hour)
	def(&c.DiscardedRetention, 7*24*time.Hour)
	def(&c.CompletedRetention, 24*time.Hour)
	def(&c.CleanupInterval, time.Minute)
	def(&c.JobTimeout, time.Minute)
	def(&c.LeaseDuration, 30*time.Second)
	def(&c.PollInterval, time.Second)
	def(&c.FlowPollInterval, 50*time.Millisecond)
	def(&c.AwaitPoll, 50*time.Millisecond)
	def(&c.RescueInterval, c.LeaseDuration/3)
	if c.CompletionBatchMax == 0 {
		c.CompletionBatchMax = 2000
	}
	if c.MaxArgsBytes == 0 {
		c.MaxArgsBytes = DefaultMaxArgsBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RetryPolicy == nil {
		c.RetryPolicy = DefaultRetryPolicy{}
	}
	if c.ClientID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.ClientID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	switch {
	case c.LeaseDuration < 100*time.Millisecond:
		return bad("LeaseDuration %s is below 100ms", c.LeaseDuration)
	case c.PollInterval < time.Millisecond:
		return bad("PollInterval %s is below 1ms", c.PollInterval)
	case c.FlowPollInterval < time.Millisecond:
		return bad("FlowPollInterval %s is below 1ms", c.FlowPollInterval)
	case c.AwaitPoll < time.Millisecond:
		return bad("AwaitPoll %s is below 1ms", c.AwaitPoll)
	case c.RescueInterval < 0 || c.CleanupInterval < 0:
		return bad("negative RescueInterval or CleanupInterval")
	case c.CompletionDelay < 0:
		return bad("negative CompletionDelay")
	case c.CompletionBatchMax < 1:
		return bad("CompletionBatchMax %d is below 1", c.CompletionBatchMax)
	case c.MaxArgsBytes < 0:
		return bad("negative MaxArgsBytes")
	case len(c.ClientID) > 200:
		return bad("ClientID longer than 200 bytes")
	}
	queues := make(map[string]QueueConfig, len(c.Queues))
	for name, q := range c.Queues {
		if err := ValidateQueueName(name); err != nil {
			return bad("queue %q: %v", name, err)
		}
		if q.MaxWorkers < 1 || q.MaxWorkers > maxQueueWorkers {
			return bad("queue %q: MaxWorkers %d is out of range 1..%d", name, q.MaxWorkers, maxQueueWorkers)
		}
		switch {
		case q.Prefetch == 0:
			q.Prefetch = q.MaxWorkers
		case q.Prefetch < 0:
			q.Prefetch = 0
		case q.Prefetch > 100000:
			return bad("queue %q: Prefetch %d is over 100000", name, q.Prefetch)
		}
		if _, err := checkFlow(q.Flow); err != nil {
			return bad("queue %q: Flow: %v", name, err)
		}
		queues[name] = q
	}
	c.Queues = queues
	return c, nil
}
