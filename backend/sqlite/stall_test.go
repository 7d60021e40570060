package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/conformance"
)

// stallChildEnv makes the test binary a child process: "MODE PATH".
//
//   - holder-spool: prints READY and waits for a line on stdin; then takes
//     the write lock in Backend.WriteTx (an insert), prints LOCKED, waits
//     for another line, commits, prints DONE.
//   - holder-raw: the same in a transaction begun on DB() directly, which
//     Spool does not measure: only the waiters see the stall.
//   - leader: runs a client that works nothing and leads maintenance (its
//     rescues), and prints LEADER once it does.
//   - worker: runs a client (lease stallLease) on queue "w" whose handlers
//     never return, and prints RUNNING when stallWorkerJobs have started.
const stallChildEnv = "SPOOL_SQLITE_STALL_CHILD"

const (
	stallLease      = time.Second
	stallRescue     = stallLease / 3 // the default RescueInterval
	stallFor        = 5 * stallLease / 2
	stallWorkerJobs = 5
)

// stallArgs is the payload of the stall tests' jobs.
type stallArgs struct {
	N int `json:"n"`
}

func (stallArgs) Kind() string { return "stall_job" }

func runStallChild(spec string) {
	mode, path, _ := strings.Cut(spec, " ")
	ctx := context.Background()
	fail := func(err error) {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	be, err := sqlite.Open(ctx, "sqlite://"+path)
	if err != nil {
		fail(err)
	}
	stdin := bufio.NewReader(os.Stdin)
	waitLine := func() {
		if _, err := stdin.ReadString('\n'); err != nil {
			fail(err)
		}
	}
	if strings.HasPrefix(mode, "holder-") {
		fmt.Println("READY")
		waitLine()
	}
	job := &backend.JobInsertParams{Queue: "holder", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 1}
	switch mode {
	case "holder-spool":
		err := be.WriteTx(ctx, func(tx *sql.Tx) error {
			if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: tx, Jobs: []*backend.JobInsertParams{job}}); err != nil {
				return err
			}
			fmt.Println("LOCKED")
			waitLine()
			return nil
		})
		if err != nil {
			fail(err)
		}
		fmt.Println("DONE")
	case "holder-raw":
		// An application's own transaction with a busy timeout of its own,
		// as the sqlite3 shell would have: DB()'s connection has none (Spool
		// waits for the lock outside SQLite), so a BEGIN there would fail
		// at once while another process writes.
		conn, err := be.DB().Conn(ctx)
		if err != nil {
			fail(err)
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 30000"); err != nil {
			fail(err)
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			fail(err)
		}
		if _, err := tx.Exec(`INSERT INTO spool_jobs (queue, kind, run_at, created_at) VALUES ('holder', 'note', 0, 0)`); err != nil {
			fail(err)
		}
		fmt.Println("LOCKED")
		waitLine()
		if err := tx.Commit(); err != nil {
			fail(err)
		}
		fmt.Println("DONE")
	case "leader":
		// A busy timeout longer than the stall: its elections and rescues
		// wait through it, so it stays the leader.
		be, err := sqlite.Open(ctx, "sqlite://"+path+"?"+sqlite.BusyTimeoutParam+"=30s")
		if err != nil {
			fail(err)
		}
		workers := spool.NewWorkers()
		spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[stallArgs]) error { return nil }))
		client, err := spool.NewClient(be, &spool.Config{
			Workers: workers, LeaseDuration: stallLease, ClientID: "stall-leader",
			Queues: map[string]spool.QueueConfig{"idle": {MaxWorkers: 1}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			fail(err)
		}
		if err := client.Start(ctx); err != nil {
			fail(err)
		}
		for {
			var leader string
			err := be.DB().QueryRowContext(ctx, `SELECT leader_id FROM spool_leader WHERE name = 'maintenance'`).Scan(&leader)
			if err == nil && leader == "stall-leader" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Println("LEADER")
		select {} // until killed
	case "worker":
		var mu sync.Mutex
		started := 0
		workers := spool.NewWorkers()
		spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[stallArgs]) error {
			mu.Lock()
			started++
			if started == stallWorkerJobs {
				fmt.Println("RUNNING")
			}
			mu.Unlock()
			<-ctx.Done()
			return ctx.Err()
		}))
		client, err := spool.NewClient(be, &spool.Config{
			Workers: workers, LeaseDuration: stallLease, JobTimeout: -1,
			Queues: map[string]spool.QueueConfig{"w": {MaxWorkers: stallWorkerJobs}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			fail(err)
		}
		if err := client.Start(ctx); err != nil {
			fail(err)
		}
		select {} // until killed
	default:
		fail(fmt.Errorf("unknown child mode %q", mode))
	}
	os.Exit(0)
}

// stallChild is a running child process of this test binary.
type stallChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startStallChild(t *testing.T, mode, path string) *stallChild {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestStall", "-test.count=1")
	cmd.Env = append(os.Environ(), stallChildEnv+"="+mode+" "+path)
	cmd.Stderr = conformance.ShownOnFailure(t, "child process stderr")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &stallChild{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

// expect waits for the child to print want.
func (c *stallChild) expect(t *testing.T, want string) time.Time {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before printing %s", want)
			}
			if l == want {
				return time.Now()
			}
			if strings.HasPrefix(l, "ERR") {
				t.Fatalf("child: %s", l)
			}
		case <-timeout:
			t.Fatalf("child did not print %s within 30s", want)
		}
	}
}

// stallRun records the starts and ends of the healthy client's jobs.
type stallRun struct {
	mu      sync.Mutex
	starts  map[int64][]time.Time // job id -> start times
	lost    map[int64]error       // job id -> why its context ended early
	release chan struct{}         // closed to let long jobs return
}

// hbGate holds back the healthy client's heartbeats at the end of a stall,
// so that the leader's first rescues after it surely come first: the race
// that a fault run lost, made certain. It changes nothing during the stall
// (heartbeats try and fail as usual, and so see the stall).
type hbGate struct {
	mu       sync.Mutex
	held     chan struct{} // non-nil while held; closed by open
	cancels  map[int]context.CancelFunc
	next     int
	inflight sync.WaitGroup
}

// hold stops the heartbeats under way and keeps new ones waiting.
func (g *hbGate) hold() {
	g.mu.Lock()
	g.held = make(chan struct{})
	for _, cancel := range g.cancels {
		cancel()
	}
	g.mu.Unlock()
	g.inflight.Wait()
}

// open lets the waiting heartbeats go, at once.
func (g *hbGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// gatedBackend is the healthy client's backend with heartbeats through g.
type gatedBackend struct {
	*sqlite.Backend
	g *hbGate
}

func (b gatedBackend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	g := b.g
	g.mu.Lock()
	if held := g.held; held != nil {
		g.mu.Unlock()
		<-held
		// Goes out the moment the gate opens, whatever the caller's
		// deadline was.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stallLease/3)
		defer cancel()
		return b.Backend.JobHeartbeatMany(ctx, p)
	}
	ctx, cancel := context.WithCancel(ctx)
	id := g.next
	g.next++
	g.cancels[id] = cancel
	g.inflight.Add(1)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.cancels, id)
		g.mu.Unlock()
		cancel()
		g.inflight.Done()
	}()
	return b.Backend.JobHeartbeatMany(ctx, p)
}

// startHealthyClient starts the test process's client: lease stallLease,
// queue "default"; jobs with n >= 0 last until run.release is closed, jobs
// with n < 0 return at once.
func startHealthyClient(t *testing.T, be *sqlite.Backend) (*spool.Client, *stallRun) {
	t.Helper()
	return startGatedClient(t, be, nil)
}

// startGatedClient is startHealthyClient with heartbeats through g (when
// not nil).
func startGatedClient(t *testing.T, be *sqlite.Backend, g *hbGate) (*spool.Client, *stallRun) {
	t.Helper()
	var bk backend.Backend = be
	if g != nil {
		bk = gatedBackend{Backend: be, g: g}
		t.Cleanup(g.open)
	}
	run := &stallRun{starts: map[int64][]time.Time{}, lost: map[int64]error{}, release: make(chan struct{})}
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[stallArgs]) error {
		run.mu.Lock()
		run.starts[job.ID] = append(run.starts[job.ID], time.Now())
		run.mu.Unlock()
		if job.Args.N < 0 {
			return nil
		}
		select {
		case <-run.release:
			return nil
		case <-ctx.Done():
			run.mu.Lock()
			run.lost[job.ID] = context.Cause(ctx)
			run.mu.Unlock()
			return context.Cause(ctx)
		}
	}))
	client, err := spool.NewClient(bk, &spool.Config{
		Workers: workers, LeaseDuration: stallLease, JobTimeout: -1,
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 50}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	return client, run
}

func (r *stallRun) started(id int64) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.starts[id]...)
}

// waitFor polls cond every 5 ms until it holds, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now()
}

// stallFile runs a holder child in mode and stops it for stallFor while it
// holds the write lock; it calls beforeLock just before the holder takes
// the lock, during as the stall starts and beforeEnd just before it ends
// (any may be nil). It returns when the holder has committed, with the
// stall's start and end.
func stallFile(t *testing.T, mode, path string, beforeLock, during, beforeEnd func()) (start, end time.Time) {
	t.Helper()
	holder := startStallChild(t, mode, path)
	holder.expect(t, "READY")
	if beforeLock != nil {
		beforeLock()
	}
	if _, err := io.WriteString(holder.stdin, "lock\n"); err != nil {
		t.Fatal(err)
	}
	holder.expect(t, "LOCKED")
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if during != nil {
		during()
	}
	// The stall itself is the scenario: the holder stays stopped this long.
	time.Sleep(time.Until(start.Add(stallFor)))
	if beforeEnd != nil {
		beforeEnd()
	}
	if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(holder.stdin, "commit\n"); err != nil {
		t.Fatal(err)
	}
	end = holder.expect(t, "DONE")
	return start, end
}

// TestStallKeepsHealthyLeases: a process stopped for 2.5 leases while it
// holds the write lock stalls every writer, heartbeats included; the
// healthy client's jobs, running across the stall, keep their leases even
// though the leader (another process) rescues before their next heartbeat:
// none is rescued or run twice, and each completes once after the stall.
// Jobs that fell due during the stall start right after it.
func TestStallKeepsHealthyLeases(t *testing.T) {
	if spec := os.Getenv(stallChildEnv); spec != "" {
		runStallChild(spec)
		return
	}
	for _, mode := range []string{"holder-spool", "holder-raw"} {
		t.Run(mode, func(t *testing.T) {
			// A busy timeout shorter than the stall, as in production
			// (5 s against pauses of seconds to minutes): writes give up
			// with ErrBusy and start again during the stall.
			be := newBackend(t, &sqlite.Options{BusyTimeout: 300 * time.Millisecond})
			// Maintenance is led by another process, as in a fleet.
			startStallChild(t, "leader", be.Path()).expect(t, "LEADER")
			gate := &hbGate{cancels: map[int]context.CancelFunc{}}
			client, run := startGatedClient(t, be, gate)
			ctx := context.Background()
			const long = 10
			var ids []int64
			for i := range long {
				res, err := client.Insert(ctx, stallArgs{N: i}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.ID)
			}
			waitFor(t, 10*time.Second, "long jobs started", func() bool {
				for _, id := range ids {
					if len(run.started(id)) == 0 {
						return false
					}
				}
				return true
			})
			// Short jobs that fall due in the middle of the stall.
			var due []int64
			dueAt := time.Now().Add(time.Second + stallFor/2)
			for i := range 5 {
				res, err := client.Insert(ctx, stallArgs{N: -1 - i}, &spool.InsertOpts{RunAt: dueAt})
				if err != nil {
					t.Fatal(err)
				}
				due = append(due, res.ID)
			}
			_, end := stallFile(t, mode, be.Path(), nil, nil, gate.hold)
			// The leader's rescues after the stall come before any of
			// the healthy client's heartbeats.
			time.Sleep(time.Until(end.Add(stallRescue + 120*time.Millisecond)))
			gate.open()

			var lastDue time.Time
			waitFor(t, 10*time.Second, "jobs due during the stall started", func() bool {
				for _, id := range due {
					s := run.started(id)
					if len(s) == 0 {
						return false
					}
					if s[0].After(lastDue) {
						lastDue = s[0]
					}
				}
				return true
			})
			// A lease lost to the stall shows within a lease and a rescue
			// interval of its end: the rescue, then the next heartbeat.
			time.Sleep(time.Until(end.Add(stallLease + 2*stallRescue + 200*time.Millisecond)))
			close(run.release)
			waitFor(t, 10*time.Second, "long jobs completed", func() bool {
				for _, id := range ids {
					j, err := be.JobGet(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if j.State != backend.StateCompleted {
						return false
					}
				}
				return true
			})
			run.mu.Lock()
			defer run.mu.Unlock()
			for id, err := range run.lost {
				t.Errorf("job %d lost its run: %v", id, err)
			}
			for _, id := range append(append([]int64(nil), ids...), due...) {
				if n := len(run.starts[id]); n != 1 {
					t.Errorf("job %d started %d times, want once", id, n)
				}
				j, err := be.JobGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if j.Attempt != 1 || len(j.Errors) != 0 {
					t.Errorf("job %d: attempt %d, errors %v; want one clean attempt", id, j.Attempt, j.Errors)
				}
			}
			delay := lastDue.Sub(end)
			t.Logf("%s: stall %s; jobs due during it started within %s of its end", mode, stallFor, delay.Round(time.Millisecond))
			if delay > time.Second {
				t.Errorf("jobs due during the stall started %s after it, want within the poll interval (1s)", delay)
			}
		})
	}
}

// TestStallDeadWorkerRescued: a worker process killed during another
// process's stall is not protected by the credit beyond the stall and the
// quiet time before it: its jobs are rescued within a lease, a heartbeat
// interval and a rescue interval of the stall's end.
func TestStallDeadWorkerRescued(t *testing.T) {
	if spec := os.Getenv(stallChildEnv); spec != "" {
		runStallChild(spec)
		return
	}
	for _, mode := range []string{"holder-spool", "holder-raw"} {
		t.Run(mode, func(t *testing.T) {
			be := newBackend(t, nil)
			// The healthy client starts first and so leads maintenance.
			client, run := startHealthyClient(t, be)
			ctx := context.Background()
			res, err := client.Insert(ctx, stallArgs{N: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			healthy := res.ID
			waitFor(t, 10*time.Second, "healthy job started", func() bool { return len(run.started(healthy)) > 0 })

			worker := startStallChild(t, "worker", be.Path())
			var dead []int64
			for i := range stallWorkerJobs {
				res, err := client.Insert(ctx, stallArgs{N: i}, &spool.InsertOpts{Queue: "w"})
				if err != nil {
					t.Fatal(err)
				}
				dead = append(dead, res.ID)
			}
			worker.expect(t, "RUNNING")

			_, end := stallFile(t, mode, be.Path(), nil, func() {
				if err := worker.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}, nil)
			waitFor(t, 10*time.Second, "dead worker's jobs rescued", func() bool {
				for _, id := range dead {
					j, err := be.JobGet(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if j.State == backend.StateRunning {
						return false
					}
				}
				return true
			})
			// The rescue's time is what it recorded in each job's errors,
			// not when this poll saw it: the poll's own delays on a loaded
			// machine are not the rescue's.
			var rescued time.Time
			for _, id := range dead {
				j, err := be.JobGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(j.Errors); n > 0 && j.Errors[n-1].At.After(rescued) {
					rescued = j.Errors[n-1].At
				}
			}
			after := rescued.Sub(end)
			t.Logf("%s: dead worker's jobs rescued %s after a %s stall (lease %s, rescue every %s)",
				mode, after.Round(time.Millisecond), stallFor, stallLease, stallRescue)
			// Its last heartbeat was before the stall, so its leases end
			// at most a lease after the stall, plus what the credit adds
			// for a holder Spool does not see: the waiters credit from the
			// last commit they saw before the stall, and the healthy
			// client's heartbeats commit every third of a lease. The rescue
			// follows within an interval (plus 300 ms for a loaded machine).
			limit := stallLease + stallRescue + 300*time.Millisecond
			if mode == "holder-raw" {
				limit += stallLease / 3
			}
			if after > limit {
				t.Errorf("rescued %s after the stall, want within %s", after, limit)
			}
			for _, id := range dead {
				j, err := be.JobGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if j.State != backend.StateRetryable || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "lease expired") {
					t.Errorf("dead worker's job %d: state %s, errors %v; want retryable after a lease expiry", id, j.State, j.Errors)
				}
			}
			close(run.release)
			waitFor(t, 10*time.Second, "healthy job completed", func() bool {
				j, err := be.JobGet(ctx, healthy)
				if err != nil {
					t.Fatal(err)
				}
				return j.State == backend.StateCompleted
			})
			if n := len(run.started(healthy)); n != 1 {
				t.Errorf("healthy job started %d times, want once", n)
			}
		})
	}
}

// TestStallCreditBeforeRescue: the first rescue after a stall, by another
// process that waited through it, takes none of the jobs whose heartbeats
// the stall kept out; the healthy worker's next heartbeat finds all its
// leases. Here the rescue is sure to run before that heartbeat (with a
// client both race for the lock when the stall ends).
func TestStallCreditBeforeRescue(t *testing.T) {
	if spec := os.Getenv(stallChildEnv); spec != "" {
		runStallChild(spec)
		return
	}
	for _, mode := range []string{"holder-spool", "holder-raw"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			worker := newBackend(t, nil)
			rescuer := reopen(t, worker)
			jobs := make([]*backend.JobInsertParams, 20)
			for i := range jobs {
				jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 3}
			}
			if _, err := worker.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
				t.Fatal(err)
			}
			rows, err := worker.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 100, Lease: stallLease, ClaimID: "worker#1"})
			if err != nil || len(rows) != len(jobs) {
				t.Fatalf("claimed %d of %d: %v", len(rows), len(jobs), err)
			}
			leases := make([]backend.LeaseRef, len(rows))
			for i, r := range rows {
				leases[i] = r.Lease()
			}
			beat := func(ctx context.Context) (*backend.JobHeartbeatManyResult, error) {
				return worker.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: stallLease})
			}
			// The last heartbeat before the stall comes just before the
			// holder takes the lock (starting the holder process can take
			// longer than a lease on a loaded machine).
			lastBeat := func() {
				if _, err := beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// During the stall both try as the runtime does: a heartbeat
			// every third of the lease, bounded by it; a rescue as often.
			// Both stop before the stall ends, so that the rescue below is
			// the first write after it.
			var wg sync.WaitGroup
			tries := func(f func(ctx context.Context) error) {
				stopAt := time.Now().Add(stallFor - 100*time.Millisecond)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(stopAt) {
						ctx, cancel := context.WithDeadline(ctx, minTime(stopAt, time.Now().Add(stallLease/3)))
						err := f(ctx)
						cancel()
						if err == nil {
							t.Errorf("a write succeeded during the stall")
							return
						}
					}
				}()
			}
			_, end := stallFile(t, mode, worker.Path(), lastBeat, func() {
				tries(func(ctx context.Context) error { _, err := beat(ctx); return err })
				tries(func(ctx context.Context) error {
					_, err := rescuer.JobRescue(ctx, &backend.JobRescueParams{})
					return err
				})
			}, nil)
			wg.Wait()
			res, err := rescuer.JobRescue(ctx, &backend.JobRescueParams{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Retried+res.Discarded != 0 {
				t.Errorf("the first rescue after the stall took %d jobs whose heartbeats the stall kept out", res.Retried+res.Discarded)
			}
			// The worker waited through the same stall: its next write
			// credits only what nobody has (the holder and the rescuer
			// have), so each lease ends at most a lease after the stall.
			if _, err := worker.JobCleanup(ctx, &backend.JobCleanupParams{}); err != nil {
				t.Fatal(err)
			}
			for _, l := range leases {
				j, err := worker.JobGet(ctx, l.ID)
				if err != nil {
					t.Fatal(err)
				}
				if j.LeasedUntil == nil || j.LeasedUntil.Before(end) || j.LeasedUntil.After(end.Add(stallLease)) {
					t.Fatalf("job %d: leased until %v, want within a lease after the stall's end %v (credited once)", l.ID, j.LeasedUntil, end)
				}
			}
			hb, err := beat(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(hb.Lost) != 0 {
				t.Errorf("heartbeat after the stall: %d of %d leases lost", len(hb.Lost), len(leases))
			}
		})
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
