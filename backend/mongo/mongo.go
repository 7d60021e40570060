// Package mongo is a Spool backend on MongoDB, after the study "A Queue With
// Publishers and Subscribers": one collection of jobs, each claim a
// findAndModify (FindOneAndUpdate) of the first due pending job in
// (priority, run_at, _id) order, served by one compound index; every write
// about a claimed job filtered on its _id and fence.
//
// It talks to the interfaces of github.com/256dpi/lungo (IClient,
// IDatabase, ICollection), which both lungo's embedded engine (lungo.Open)
// and the official driver (lungo.Connect) satisfy. backend.Open opens
// mongodb:// and mongodb+srv:// URLs through the driver, and lungo://NAME
// an embedded engine in memory shared by every Open of NAME in the process.
//
// It has not been run against a MongoDB server: its tests run on lungo's
// engine. What it does not give (caller transactions, flow control,
// workflows and batches, durable steps, debounce) it refuses with an error
// matching ErrNotSupported; docs/mongo.md says why.
package mongo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// ErrNotSupported means the operation needs a guarantee this backend does
// not give (docs/mongo.md lists them); nothing was written.
var ErrNotSupported = errors.New("not supported by the mongo backend")

// Collection names, in the backend's database.
const (
	jobsColl     = "spool_jobs"
	metaColl     = "spool_meta"
	leadersColl  = "spool_leaders"
	queuesColl   = "spool_queues"
	periodicColl = "spool_periodic"
)

// Options configure a backend.
type Options struct {
	// FinishedTTL, when not zero, makes Migrate create a TTL index that
	// has the server delete finished jobs this long after they finished,
	// as the study's TTL index does; Spool's own retention (Config's
	// retention settings) works with or without it. The server removes
	// expired documents in the background (every 60 s on MongoDB), so it
	// is no exact bound.
	FinishedTTL time.Duration
}

// Backend is a Spool store in one MongoDB database. It is safe for
// concurrent use.
type Backend struct {
	client lungo.IClient
	db     lungo.IDatabase
	jobs   lungo.ICollection
	meta   lungo.ICollection
	opts   Options
	// owned is closed by Close (what Open connected); nil for a client
	// the caller passed to New.
	owned func(context.Context) error
	// migrated caches a schema version seen current, so that inserts
	// check the schema once per handle.
	migrated atomic.Bool
	// embedded is set for lungo's engine, whose clock is this process's.
	embedded bool
	// clockMu guards last, the latest reading of the server's clock.
	clockMu sync.Mutex
	last    time.Time
}

// New returns a backend on database db of client, which the caller keeps
// (Close does not disconnect it).
func New(client lungo.IClient, db string, opts Options) *Backend {
	d := client.Database(db)
	_, embedded := client.(*lungo.Client)
	return &Backend{client: client, db: d, jobs: d.Collection(jobsColl), meta: d.Collection(metaColl), opts: opts, embedded: embedded}
}

// OpenEngine returns a backend on a new embedded lungo engine kept in
// memory, and the engine (for more handles: New(lungo.NewClient(engine),
// …)). Close closes neither; close the engine when done.
func OpenEngine(ctx context.Context, db string, opts Options) (*Backend, *lungo.Engine, error) {
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	if err != nil {
		return nil, nil, fmt.Errorf("open lungo engine: %w", err)
	}
	return New(client, db, opts), engine, nil
}

var (
	enginesMu sync.Mutex
	engines   = map[string]*lungo.Engine{}
)

func init() {
	backend.Register(open, "mongodb", "mongodb+srv", "lungo")
}

// open opens mongodb://…/DB (the driver; DB defaults to "spool") or
// lungo://NAME (the embedded engine named NAME, database "spool").
func open(ctx context.Context, dsn string) (backend.Backend, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("open mongo backend: %w", err)
	}
	if u.Scheme == "lungo" {
		name := u.Host + u.Path
		enginesMu.Lock()
		defer enginesMu.Unlock()
		e, ok := engines[name]
		if !ok {
			_, e, err = lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
			if err != nil {
				return nil, fmt.Errorf("open lungo engine %q: %w", name, err)
			}
			engines[name] = e
		}
		return New(lungo.NewClient(e), "spool", Options{}), nil
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = "spool"
	}
	return Dial(ctx, dsn, db, Options{})
}

// Dial connects to the MongoDB deployment at uri through the official
// driver and returns a backend on its database db; Close disconnects.
func Dial(ctx context.Context, uri, db string, opts Options) (*Backend, error) {
	client, err := lungo.Connect(ctx, options.Client().ApplyURI(uri))
	if err != nil {
		return nil, fmt.Errorf("open mongo backend: %w: %w", backend.ErrUnavailable, err)
	}
	if err := client.Ping(ctx, nil); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("open mongo backend: %w: %w", backend.ErrUnavailable, err)
	}
	b := New(client, db, opts)
	b.owned = client.Disconnect
	return b, nil
}

// DropDatabase drops the backend's database, every job with it (tests).
func (b *Backend) DropDatabase(ctx context.Context) error { return b.db.Drop(ctx) }

// CloseEngine closes the embedded engine that lungo://name opened, and
// forgets it: its jobs are gone.
func CloseEngine(name string) {
	enginesMu.Lock()
	e, ok := engines[name]
	delete(engines, name)
	enginesMu.Unlock()
	if ok {
		e.Close()
	}
}

// Database returns the name of the backend's database.
func (b *Backend) Database() string { return b.db.Name() }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "mongo" }

// Close implements backend.Backend: it disconnects a client Open made.
func (b *Backend) Close() error {
	if b.owned == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.owned(ctx)
}

// now reads the server's clock: a $currentDate on the clock document,
// read back. Every time that decides ownership (lease ends, due times,
// retry times) is this plus a duration, so worker clocks never decide
// them; the reading precedes the write it serves by one round trip, which
// only makes a lease that much shorter. The embedded engine's clock is
// this process's (its $currentDate reads it), so there it is read
// directly, without a write.
func (b *Backend) now(ctx context.Context) (time.Time, error) {
	if b.embedded {
		return b.monotonic(time.Now().UTC().Truncate(time.Microsecond)), nil
	}
	var doc struct {
		Now time.Time `bson:"now"`
	}
	err := b.meta.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "clock"}},
		bson.D{{Key: "$currentDate", Value: bson.D{{Key: "now", Value: true}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the server's clock: %w", err)
	}
	return b.monotonic(doc.Now.UTC()), nil
}

// monotonic returns t, or, when t is not after the handle's last reading
// but within a millisecond of it (BSON dates are milliseconds, so readings
// share one), that reading plus a microsecond: a handle's inserts get
// distinct, increasing creation times.
func (b *Backend) monotonic(t time.Time) time.Time {
	b.clockMu.Lock()
	defer b.clockMu.Unlock()
	if !t.After(b.last) && b.last.Sub(t) < time.Millisecond {
		t = b.last.Add(time.Microsecond)
	}
	if t.After(b.last) {
		b.last = t
	}
	return t
}

// nextIDs reserves n job ids from the sequence document and returns the
// first.
func (b *Backend) nextIDs(ctx context.Context, n int) (int64, error) {
	var doc struct {
		N int64 `bson:"n"`
	}
	err := b.meta.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "jobs_seq"}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(n)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
	if err != nil {
		return 0, fmt.Errorf("reserve job ids: %w", err)
	}
	return doc.N - int64(n) + 1, nil
}

// notFound reports whether err is the driver's "no document".
func notFound(err error) bool { return errors.Is(err, mongo.ErrNoDocuments) }

// duplicateKey reports whether err is a unique index violation (E11000).
func duplicateKey(err error) bool {
	return mongo.IsDuplicateKeyError(err) || lungo.IsUniquenessError(err)
}

// noTx refuses a caller's transaction: see docs/mongo.md.
func noTx(tx backend.Tx) error {
	if tx == nil {
		return nil
	}
	return fmt.Errorf("%w: caller transactions (%w)", backend.ErrTxType, ErrNotSupported)
}

// ctxError makes err, from a call whose context ended, match the context's
// error (errors.Is): lungo gives up waiting for its write token when the
// context ends, but says "token acquisition timeout", so a caller could not
// tell a cancelled call from a failed one (a stop's deadline, a claim's
// timeout).
func ctxError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", err, cerr)
	}
	return err
}
