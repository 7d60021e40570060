package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// This file holds the outcome-fault scenarios that the network backends
// (PostgreSQL, MySQL) run through a test proxy: each backend's test builds a
// Faults of its own connections and calls the scenario, so that what an
// insert or an administrator's write reports when its connection is cut or
// its reply lost is checked the same way on every backend.

// Reader is what the fault scenarios read directly, past the proxy.
type Reader interface {
	JobGet(ctx context.Context, id int64) (*backend.JobRow, error)
	QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error)
}

// Proxy is the test proxy between a Faults client and its server.
type Proxy interface {
	// Cut makes the server unreachable through the proxy.
	Cut()
	// Restore ends Cut and the dropping of replies.
	Restore()
	// DropReplies loses every reply from the server from now on.
	DropReplies()
	// DropReplyTo loses the reply to the next statement holding text.
	DropReplyTo(text string)
}

// Faults is a backend's harness for the outcome-fault scenarios: a client
// whose connections run through a proxy, the means to read and insert
// past the proxy, and the proxy.
type Faults struct {
	// Client inserts and administers through Proxy.
	Client *spool.Client
	// Inserter inserts past the proxy.
	Inserter *spool.Client
	// Direct reads past the proxy.
	Direct Reader
	// Proxy makes the faults.
	Proxy Proxy
}

// InsertNote inserts a NoteArgs job of number n with c and returns its id.
func InsertNote(t testing.TB, c *spool.Client, n int) int64 {
	t.Helper()
	res, err := c.Insert(context.Background(), NoteArgs{N: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// CountJobs counts the jobs of every queue and state in r.
func CountJobs(t testing.TB, r Reader) int {
	t.Helper()
	stats, err := r.QueueStatsAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range stats {
		for _, c := range s.Counts {
			n += int(c)
		}
	}
	return n
}

// JobStates returns the states of the jobs ids in r, in order.
func JobStates(t testing.TB, r Reader, ids ...int64) []backend.State {
	t.Helper()
	out := make([]backend.State, len(ids))
	for i, id := range ids {
		j, err := r.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = j.State
	}
	return out
}

// InsertReplyLost checks that an insert whose reply is lost after the
// server ran it fails with ErrOutcomeUnknown, and that it did commit: the
// case the error exists to warn of. It leaves replies dropped and two jobs
// stored.
func InsertReplyLost(t *testing.T, f Faults) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.Client.Insert(ctx, NoteArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	f.Proxy.DropReplies()
	_, err := f.Client.Insert(ctx, NoteArgs{N: 2}, nil)
	if !errors.Is(err, spool.ErrOutcomeUnknown) || errors.Is(err, spool.ErrNotWritten) {
		t.Fatalf("insert whose reply was lost: got %v, want ErrOutcomeUnknown", err)
	}
	if got := CountJobs(t, f.Direct); got != 2 {
		t.Fatalf("jobs stored: %d, want 2 (the insert whose reply was lost committed)", got)
	}
}

// InsertWithoutServer checks that, with the server unreachable, an insert
// that needs a new connection fails with ErrNotWritten and writes nothing.
// An insert sent on a pooled connection the outage closed may fail either
// way (it was written to a dead socket), never with a raw error.
func InsertWithoutServer(t *testing.T, f Faults) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.Client.Insert(ctx, NoteArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	f.Proxy.Cut()
	notWritten := false
	for i := 0; i < 3 && !notWritten; i++ {
		_, err := f.Client.Insert(ctx, NoteArgs{N: 2}, nil)
		switch {
		case errors.Is(err, spool.ErrNotWritten):
			notWritten = true
		case errors.Is(err, spool.ErrOutcomeUnknown):
		default:
			t.Fatalf("insert %d with the server unreachable: got %v, want ErrNotWritten or ErrOutcomeUnknown", i, err)
		}
	}
	if !notWritten {
		t.Fatal("no insert was reported as not written while the server was unreachable")
	}
	f.Proxy.Restore()
	if got := CountJobs(t, f.Direct); got != 1 {
		t.Fatalf("jobs stored: %d, want 1", got)
	}
}

// AdminWritesWithoutServer checks that, with the server unreachable,
// cancel, retry, delete, bulk cancel and pause fail with ErrNotWritten and
// change nothing. f.Client must not have connected yet (Cut comes before
// its first connection).
func AdminWritesWithoutServer(t *testing.T, f Faults) {
	t.Helper()
	id := InsertNote(t, f.Inserter, 1)
	f.Proxy.Cut()
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, spool.ErrNotWritten) || errors.Is(err, spool.ErrOutcomeUnknown) {
			t.Fatalf("%s with the server unreachable: got %v, want ErrNotWritten", op, err)
		}
	}
	c := f.Client
	_, err := c.JobCancel(ctx, id)
	check("cancel", err)
	_, err = c.JobRetry(ctx, id)
	check("retry", err)
	_, err = c.JobDelete(ctx, id)
	check("delete", err)
	res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "default"})
	check("bulk cancel", err)
	if res.Changed != 0 {
		t.Fatalf("bulk cancel changed %d", res.Changed)
	}
	check("pause", c.QueuePause(ctx, "default"))
	if got := JobStates(t, f.Direct, id); got[0] != backend.StateAvailable {
		t.Fatalf("job after the failed writes: %s, want available", got[0])
	}
}

// AdminCommits names, for AdminWriteReplyLost, the statement text whose
// reply the proxy loses for each write: the one that commits it.
type AdminCommits struct {
	Cancel, Retry, BulkCancel string
}

// AdminWriteReplyLost checks that a cancel, retry or bulk cancel whose
// commit's reply is lost fails with ErrOutcomeUnknown, and that it did
// commit: the case the error exists to warn of.
func AdminWriteReplyLost(t *testing.T, f Faults, commits AdminCommits) {
	t.Helper()
	id := InsertNote(t, f.Inserter, 1)
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, spool.ErrOutcomeUnknown) || errors.Is(err, spool.ErrNotWritten) {
			t.Fatalf("%s whose reply was lost: got %v, want ErrOutcomeUnknown", op, err)
		}
	}
	c := f.Client

	f.Proxy.DropReplyTo(commits.Cancel)
	_, err := c.JobCancel(ctx, id)
	check("cancel", err)
	if got := JobStates(t, f.Direct, id); got[0] != backend.StateCancelled {
		t.Fatalf("job after the cancel whose reply was lost: %s, want cancelled (it committed)", got[0])
	}

	f.Proxy.DropReplyTo(commits.Retry)
	_, err = c.JobRetry(ctx, id)
	check("retry", err)
	if got := JobStates(t, f.Direct, id); got[0] != backend.StateAvailable {
		t.Fatalf("job after the retry whose reply was lost: %s, want available (it committed)", got[0])
	}

	more := []int64{InsertNote(t, f.Inserter, 2), InsertNote(t, f.Inserter, 3)}
	f.Proxy.DropReplyTo(commits.BulkCancel)
	res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "default"})
	check("bulk cancel", err)
	if res.Changed != 0 {
		t.Fatalf("bulk cancel reported %d changed", res.Changed)
	}
	for i, s := range JobStates(t, f.Direct, append(more, id)...) {
		if s != backend.StateCancelled {
			t.Fatalf("job %d after the bulk cancel whose reply was lost: %s, want cancelled (it committed)", i, s)
		}
	}
}

// Restarts is a backend's harness for InsertDuringRestarts: a server of
// the test's own that it may restart.
type Restarts struct {
	// Client inserts into the server.
	Client *spool.Client
	// Modes are the restarts made in turn, one Restart each.
	Modes []string
	// Restart restarts the server the way mode says.
	Restart func(ctx context.Context, mode string) error
	// Recover bounds the wait for inserts to succeed again after a restart.
	Recover time.Duration
	// Stored returns the numbers (NoteArgs.N) of the jobs stored.
	Stored func(ctx context.Context) (map[int]bool, error)
}

// InsertDuringRestarts inserts from several goroutines, single jobs and
// batches of five in turn, while the server restarts in each of r.Modes.
// Every failed insert must say whether it may have committed, and say it
// truly: a batch reported not written is absent, a successful one present,
// and a batch of unknown outcome is all there or all absent.
func InsertDuringRestarts(t *testing.T, r Restarts) {
	t.Helper()
	ctx := context.Background()
	c := r.Client
	type attempt struct {
		ns  []int
		err error
	}
	var (
		mu       sync.Mutex
		attempts []attempt
		next     atomic.Int64
		ok       atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				size := 1
				if i%2 == 1 {
					size = 5 // odd rounds insert a batch
				}
				ns := make([]int, size)
				params := make([]spool.InsertManyParams, size)
				for k := range ns {
					ns[k] = int(next.Add(1))
					params[k] = spool.InsertManyParams{Args: NoteArgs{N: ns[k]}}
				}
				ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
				var err error
				if size == 1 {
					_, err = c.Insert(ictx, params[0].Args, nil)
				} else {
					_, err = c.InsertMany(ictx, params)
				}
				cancel()
				if err == nil {
					ok.Add(1)
				}
				mu.Lock()
				attempts = append(attempts, attempt{ns, err})
				mu.Unlock()
			}
		}()
	}
	// Each restart waits for inserts to succeed again after the last.
	waitForInserts := func() {
		from := ok.Load()
		deadline := time.Now().Add(r.Recover)
		for ok.Load() < from+20 {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("inserts did not recover within %s of a restart", r.Recover)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, mode := range r.Modes {
		waitForInserts()
		if err := r.Restart(ctx, mode); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	waitForInserts()
	close(stop)
	wg.Wait()

	stored, err := r.Stored(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var failed, notWritten, unknown, unknownCommitted int
	for _, a := range attempts {
		present := 0
		for _, n := range a.ns {
			if stored[n] {
				present++
			}
		}
		desc := fmt.Sprintf("insert of %d job(s) from %d", len(a.ns), a.ns[0])
		switch {
		case a.err == nil:
			if present != len(a.ns) {
				t.Errorf("%s succeeded but %d of its jobs are stored", desc, present)
			}
			continue
		case errors.Is(a.err, spool.ErrNotWritten) && errors.Is(a.err, spool.ErrOutcomeUnknown):
			t.Errorf("%s: both not written and of unknown outcome: %v", desc, a.err)
		case errors.Is(a.err, spool.ErrNotWritten):
			notWritten++
			if present != 0 {
				t.Errorf("%s reported not written, but %d of its jobs are stored: %v", desc, present, a.err)
			}
		case errors.Is(a.err, spool.ErrOutcomeUnknown):
			unknown++
			if present != 0 && present != len(a.ns) {
				t.Errorf("%s of unknown outcome is half stored (%d jobs): %v", desc, present, a.err)
			}
			if present > 0 {
				unknownCommitted++
			}
		default:
			t.Errorf("%s failed without saying whether it may have committed: %v", desc, a.err)
		}
		failed++
	}
	if failed == 0 {
		t.Fatalf("no insert failed across %d restarts: the test did not exercise the fault (%d inserts)", len(r.Modes), len(attempts))
	}
	t.Logf("%d inserts, %d failed: %d not written, %d of unknown outcome (%d of them committed)",
		len(attempts), failed, notWritten, unknown, unknownCommitted)
}

// LogLines is a slog.Handler that keeps the text of every line, level,
// message and attributes, and closes Seen when the first line holding its
// want arrives: for tests that read what a client logged, or wait for it
// to log one thing.
type LogLines struct {
	mu    sync.Mutex
	lines []string
	want  string
	seen  chan struct{}
	once  sync.Once
}

// NewLogLines returns an empty LogLines whose Seen waits for a line holding
// want; with want empty, Seen is closed by the first line.
func NewLogLines(want string) *LogLines { return &LogLines{want: want, seen: make(chan struct{})} }

// Seen is closed when the first line holding want is handled.
func (l *LogLines) Seen() <-chan struct{} { return l.seen }

// Text returns the lines so far, one a line.
func (l *LogLines) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// Enabled implements slog.Handler: every level.
func (l *LogLines) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (l *LogLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + recordText(r)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	if strings.Contains(line, l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return nil
}

// WithAttrs implements slog.Handler; the attributes are dropped.
func (l *LogLines) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup implements slog.Handler; the group is dropped.
func (l *LogLines) WithGroup(string) slog.Handler { return l }

// recordText is a record's message and attributes, space-separated.
func recordText(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	return b.String()
}

// CompletionReplyLostClient returns a client on be, logging to logs, with
// one worker slot on the default queue, whose NoteArgs worker has proxy
// lose the reply to the next statement holding completion (the text of the
// backend's completing statement) and then succeeds: for tests of what the
// outcome writer logs and does when its write's reply is lost. The client
// is not started.
func CompletionReplyLostClient(t *testing.T, be backend.Backend, logs slog.Handler, proxy Proxy, completion string) *spool.Client {
	t.Helper()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[NoteArgs]) error {
		proxy.DropReplyTo(completion)
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Logger: slog.New(logs),
		Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
