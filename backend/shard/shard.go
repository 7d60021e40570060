// Package shard is a backend that spreads jobs over several databases behind
// one client: each shard is an ordinary backend (PostgreSQL, MySQL, …) with
// its own migrated store, and the sharded backend places every job on one of
// them, claims from them, and fans admin reads out and merges them.
//
// Placement is by queue (the default: a queue lives on one shard, chosen by
// rendezvous hashing of its name, or pinned by Options.Queues) or by key
// (Options.Placement ByKey: a job's key, by default its flow key or else its
// unique key, decides its shard, so a key's jobs keep their order; jobs
// without a key are spread round robin and a queue spans every shard).
//
// Job ids carry their shard: global = local × 256 + shard. Everything that
// names a job by id (get, retry, cancel, delete, leases, heartbeats,
// outcomes) goes to that shard with no lookup.
//
// A caller's transaction belongs to one database, so transactions given to
// InsertTx or CompleteTx must say which shard they belong to: a Tx names it,
// a *LazyTx begins one on the shard the first job needs. A transaction of
// another shard than the jobs' is refused with ErrWrongShard, and nothing is
// written. docs/sharding.md lists what holds only per shard.
package shard

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// MaxShards is the most shards a backend can have: ids keep the shard in
// their low 8 bits.
const MaxShards = 256

// Placement says how jobs are spread over the shards.
type Placement uint8

// Placements.
const (
	// ByQueue keeps each queue on one shard.
	ByQueue Placement = iota
	// ByKey spreads a queue over every shard by each job's key.
	ByKey
)

// Options configure a sharded backend. The zero value places by queue.
type Options struct {
	Placement Placement
	// Queues pins queues to shards (by index) under ByQueue, overriding the
	// hash: for a queue whose jobs are inserted in transactions of one
	// particular database.
	Queues map[string]int
	// KeyOf returns a job's placement key under ByKey. Nil uses the flow
	// key, or else the unique key, so that a key's order and a unique key's
	// uniqueness hold. Jobs whose key is empty are spread round robin.
	KeyOf func(*backend.JobInsertParams) string
}

// ErrWrongShard is returned when a transaction belongs to another shard than
// the jobs it would write, or a call would need transactions of two shards.
// Nothing is written.
var ErrWrongShard = errors.New("transaction belongs to another shard than the jobs")

// Backend is a sharded backend. It implements backend.Backend,
// backend.Notifier (when every shard can deliver wake-ups; otherwise Listen
// reports backend.ErrNoWakeUps and clients poll) and backend.DeadlockCounter.
type Backend struct {
	shards []backend.Backend
	// all lists every shard's number, in order: the shards a fan-out asks
	// (a queue's older jobs may be on any of them, under ByQueue too).
	all  []int
	opts Options
	// claims rotates the first shard a claim tries; inserts spreads jobs
	// without a key.
	claims, inserts atomic.Uint64
	// strays times the looks for a queue's jobs on other shards than its
	// own under ByQueue.
	strays strayLooks
}

// strayLookEvery is how often, at most, a claim under ByQueue looks on the
// other shards for jobs of its queue: jobs inserted before shards were
// added (or a pin changed) stay where they were, and are claimed there.
// While a look finds some, every claim looks; after a look that found some,
// empty looks back off from strayLookAgain to strayLookEvery, since a
// claim can take nothing while strays are still there (a flow rule held
// them back).
const (
	strayLookEvery = 10 * time.Second
	strayLookAgain = 100 * time.Millisecond
)

// strayLooks keeps, per queue, when its strays are next looked for.
type strayLooks struct {
	mu     sync.Mutex
	queues map[string]*strayLook
}

type strayLook struct {
	next time.Time
	wait time.Duration // after the next empty look; 0: none found yet
}

// due reports whether queue's strays are to be looked for now.
func (l *strayLooks) due(queue string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.queues[queue]
	return !ok || !time.Now().Before(q.next)
}

// looked records a look and whether it found strays.
func (l *strayLooks) looked(queue string, found bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queues == nil {
		l.queues = map[string]*strayLook{}
	}
	q, ok := l.queues[queue]
	if !ok {
		q = &strayLook{}
		l.queues[queue] = q
	}
	switch {
	case found:
		q.next, q.wait = time.Time{}, strayLookAgain
	case q.wait == 0:
		q.next = time.Now().Add(strayLookEvery)
	default:
		q.next = time.Now().Add(q.wait)
		q.wait = min(2*q.wait, strayLookEvery)
	}
}

// New returns a backend over shards, in order: a shard's position is its
// number and is written into job ids, so the list may only ever grow, at
// its end. The backend owns the shards and closes them on Close.
func New(shards []backend.Backend, opts *Options) (*Backend, error) {
	if len(shards) == 0 || len(shards) > MaxShards {
		return nil, fmt.Errorf("shard: %d shards, want 1 to %d", len(shards), MaxShards)
	}
	for i, s := range shards {
		if s == nil {
			return nil, fmt.Errorf("shard: shard %d is nil", i)
		}
	}
	b := &Backend{shards: shards, all: make([]int, len(shards))}
	for i := range b.all {
		b.all[i] = i
	}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Placement != ByQueue && b.opts.Placement != ByKey {
		return nil, fmt.Errorf("shard: unknown placement %d", b.opts.Placement)
	}
	for q, i := range b.opts.Queues {
		if i < 0 || i >= len(shards) {
			return nil, fmt.Errorf("shard: queue %q pinned to shard %d of %d", q, i, len(shards))
		}
	}
	if b.opts.KeyOf == nil {
		b.opts.KeyOf = defaultKey
	}
	return b, nil
}

func defaultKey(j *backend.JobInsertParams) string {
	if j.FlowKey != "" {
		return j.FlowKey
	}
	return j.UniqueKey
}

// Shards returns the number of shards.
func (b *Backend) Shards() int { return len(b.shards) }

// Shard returns shard i's backend.
func (b *Backend) Shard(i int) backend.Backend { return b.shards[i] }

// Name is "shard".
func (b *Backend) Name() string { return "shard" }

// QueueShard returns the shard of a queue under ByQueue, and -1 under ByKey
// (a queue spans every shard).
func (b *Backend) QueueShard(queue string) int {
	if b.opts.Placement != ByQueue {
		return -1
	}
	if i, ok := b.opts.Queues[queue]; ok {
		return i
	}
	return rendezvous(queue, len(b.shards))
}

// KeyShard returns the shard of a placement key under ByKey.
func (b *Backend) KeyShard(key string) int { return rendezvous(key, len(b.shards)) }

// JobShard returns the shard a job id belongs to.
func JobShard(id int64) int { return int(id % MaxShards) }

// rendezvous picks the shard with the highest hash of (name, shard): adding
// a shard moves only the names that now score highest on it, about 1/n.
func rendezvous(name string, n int) int {
	if n == 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	base := h.Sum64()
	best, bestScore := 0, uint64(0)
	for i := range n {
		if s := mix(base ^ uint64(i+1)*0x9e3779b97f4a7c15); i == 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// mix is splitmix64's finalizer: it spreads every input bit over the output.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// global is the id of local job id on shard s.
func global(local int64, s int) int64 { return local*MaxShards + int64(s) }

// split returns a global id's shard and local id; ok is false for an id no
// shard of b can hold.
func (b *Backend) split(id int64) (s int, local int64, ok bool) {
	if id <= 0 {
		return 0, 0, false
	}
	s, local = int(id%MaxShards), id/MaxShards
	return s, local, s < len(b.shards) && local > 0
}

func globalRow(j *backend.JobRow, s int) *backend.JobRow {
	if j != nil {
		j.ID = global(j.ID, s)
		if j.WorkflowID != 0 {
			j.WorkflowID = global(j.WorkflowID, s)
		}
		if j.BatchID != 0 {
			j.BatchID = global(j.BatchID, s)
		}
	}
	return j
}

func globalRows(rows []*backend.JobRow, s int) []*backend.JobRow {
	for _, j := range rows {
		globalRow(j, s)
	}
	return rows
}

func globalLease(l backend.LeaseRef, s int) backend.LeaseRef {
	return backend.LeaseRef{ID: global(l.ID, s), Fence: l.Fence}
}

// onShard returns the shard and local id of a job id, or ErrNotFound.
func (b *Backend) onShard(op string, id int64) (int, int64, error) {
	s, local, ok := b.split(id)
	if !ok {
		return 0, 0, fmt.Errorf("%s job %d: %w", op, id, backend.ErrNotFound)
	}
	return s, local, nil
}

// each runs f on every shard at once and returns the failures joined
// (joinShardErrors), each naming its shard.
func (b *Backend) each(f func(s int, be backend.Backend) error) error {
	return b.some(b.all, func(s int) error { return f(s, b.shards[s]) })
}

// rotation returns every shard's number, starting one further than the
// previous call's: the order in which a claim under ByKey asks them.
func (b *Backend) rotation() []int {
	first := b.rotate(&b.claims)
	return append(b.all[first:len(b.all):len(b.all)], b.all[:first]...)
}

// Close closes every shard.
func (b *Backend) Close() error {
	var errs []error
	for i, be := range b.shards {
		if err := be.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// CreditsStalls reports whether any shard credits its writers' stalls to
// running leases (backend.StallCrediter): then a lease of this store may
// outlast its holder's clock.
func (b *Backend) CreditsStalls() bool {
	for _, be := range b.shards {
		if sc, ok := be.(backend.StallCrediter); ok && sc.CreditsStalls() {
			return true
		}
	}
	return false
}

// DeadlockRetries sums the shards' deadlock retries (those that count them).
func (b *Backend) DeadlockRetries() uint64 {
	var n uint64
	for _, be := range b.shards {
		if dc, ok := be.(backend.DeadlockCounter); ok {
			n += dc.DeadlockRetries()
		}
	}
	return n
}

// ConformancePerShardByKey names the conformance tests
// (conformance.Spread.PerStore) of guarantees that hold per shard when a
// queue spans the shards, each with what holds (docs/sharding.md). Those
// tests assert it instead of the whole queue's guarantee.
var ConformancePerShardByKey = map[string]string{
	"ClaimOrder":                  "under ByKey, priority and run-time order hold within each shard: a claim takes each shard's jobs in order, never one behind a better job of its shard, and takes from the shards in turn",
	"FlowGlobalLimit":             "under ByKey, a queue-wide concurrency limit holds on each shard separately: no shard runs more than the limit, each can run that many",
	"FlowWideLimits":              "under ByKey, a queue-wide limit is exact for the whole queue only when its jobs are on one shard (one key): checked so",
	"FlowQuickClaim":              "under ByKey, each shard keeps a queue-wide limit's striped rule for its own jobs: checked with the jobs on one shard (one key), through the claim's rotation",
	"FlowKilledWorkerSlotsReturn": "under ByKey, a queue-wide limit's slots are each shard's own: checked with the jobs on one shard (one key)",
	"FlowFairShare":               "under ByKey, fair shares are kept among the keys of each shard: checked with keys on one shard",
	"FlowFairSmallNotStarved":     "under ByKey, fair shares are kept among the keys of each shard: checked with keys on one shard",
}

var _ backend.Backend = (*Backend)(nil)
