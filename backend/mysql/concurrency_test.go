package mysql_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// Environment of a child worker process (see TestMain).
const (
	childDatabaseEnv = "SPOOL_TEST_MYSQL_CHILD_DATABASE"
	childStrategyEnv = "SPOOL_TEST_MYSQL_CHILD_STRATEGY"
)

// childWorkers is how many workers each child process runs.
const childWorkers = 5

func TestMain(m *testing.M) {
	if db := os.Getenv(childDatabaseEnv); db != "" {
		os.Exit(runChildWorker(db, os.Getenv(childStrategyEnv)))
	}
	code := m.Run()
	testdb.DropKeptSchemas()
	os.Exit(code)
}

// runChildWorker works the jobs of database until SIGTERM, then stops
// softly. It prints "run <n> <id> <attempt> <fence> <ok|fail>" for every run
// and, last, "metrics <deadlocks> <lock wait timeouts> <exhausted>". Jobs
// with Mode "fail-once" fail their first attempt.
func runChildWorker(database, strategy string) int {
	ctx := context.Background()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	be, err := mysql.Open(ctx, testdb.MySQLDatabaseURL(database, url.Values{mysql.ClaimParam: {strategy}}))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer be.Close()
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		result := "ok"
		if j.Args.Mode == "fail-once" && j.Attempt == 1 {
			result = "fail"
		}
		mu.Lock()
		fmt.Fprintf(out, "run %d %d %d %d %s\n", j.Args.N, j.ID, j.Attempt, j.Fence, result)
		mu.Unlock()
		if result == "fail" {
			return errors.New("first attempt fails")
		}
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		PollInterval:   20 * time.Millisecond,
		RetryPolicy:    spool.ConstantRetryPolicy{Delay: 0},
		RescueInterval: time.Second,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: childWorkers, Prefetch: 50}},
	})
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	<-term
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
	}
	m := be.Metrics()
	fmt.Fprintf(out, "metrics %d %d %d\n", m.Deadlocks, m.LockWaitTimeouts, m.RetriesExhausted)
	if err := out.Flush(); err != nil {
		return 1
	}
	return 0
}

// run is one handler run reported by a child.
type run struct {
	id, attempt, fence int64
	ok                 bool
}

// TestManyProcesses runs 20 workers in 4 processes over 20,000 jobs while
// the test keeps inserting, every tenth job fails once and is retried, and
// every 97th is cancelled soon after its insert (pending, running or already
// done). At the end no job is lost, none ran more than its attempts (no
// duplicate), every cancel that succeeded holds, and no deadlock or lock
// wait timeout reached a client.
func TestManyProcesses(t *testing.T) {
	t.Parallel()
	const (
		// 20,000 rather than 50,000: the same contention (20 workers in 4
		// processes, claims against inserts and cancels) in a third of
		// the time, which CI's budget needs (BENCHMARKS.md, "CI's time:
		// schemas kept between tests").
		jobs      = 20000
		processes = 4
		batch     = 500
	)
	be := newBackend(t, nil)
	ctx := context.Background()
	inserter, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]spool.InsertManyParams, jobs)
	for i := range params {
		a := conformance.NoteArgs{N: i}
		if i%10 == 3 {
			a.Mode = "fail-once"
		}
		params[i] = spool.InsertManyParams{Args: a}
	}
	ids := make([]int64, jobs)
	insert := func(from, to int) {
		res, err := inserter.InsertMany(ctx, params[from:to])
		if err != nil {
			t.Fatalf("insert %d..%d: %v", from, to, err)
		}
		for i, r := range res {
			ids[from+i] = r.ID
		}
	}
	insert(0, jobs/5)

	var (
		mu      sync.Mutex
		runs    = make(map[int][]run, jobs)
		metrics [3]int64
		stderr  conformance.LogBuffer
		readers sync.WaitGroup
		kids    []*exec.Cmd
	)
	for p := 0; p < processes; p++ {
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), childDatabaseEnv+"="+be.Database(), childStrategyEnv+"="+be.ClaimStrategy())
		child.Stderr = &stderr
		stdout, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, child)
		readers.Go(func() {
			lines := bufio.NewScanner(stdout)
			for lines.Scan() {
				var (
					n      int
					r      run
					result string
					m      [3]int64
				)
				line := lines.Text()
				switch {
				case strings.HasPrefix(line, "run "):
					if _, err := fmt.Sscanf(line, "run %d %d %d %d %s", &n, &r.id, &r.attempt, &r.fence, &result); err != nil {
						t.Errorf("child said %q", line)
						continue
					}
					r.ok = result == "ok"
					mu.Lock()
					runs[n] = append(runs[n], r)
					mu.Unlock()
				case strings.HasPrefix(line, "metrics "):
					if _, err := fmt.Sscanf(line, "metrics %d %d %d", &m[0], &m[1], &m[2]); err != nil {
						t.Errorf("child said %q", line)
					}
					mu.Lock()
					for i := range m {
						metrics[i] += m[i]
					}
					mu.Unlock()
				default:
					t.Errorf("child said %q", line)
				}
			}
		})
	}
	defer func() {
		for _, k := range kids {
			if k.ProcessState == nil {
				_ = k.Process.Kill()
				_ = k.Wait()
			}
		}
	}()

	// The rest arrive while the children work; some are cancelled at once.
	cancelled := map[int]bool{}
	cancel := func(from, to int) {
		for n := from; n < to; n++ {
			if n%97 != 0 {
				continue
			}
			_, err := be.JobCancel(ctx, &backend.JobCancelParams{ID: ids[n]})
			switch {
			case err == nil:
				cancelled[n] = true
			case !errors.Is(err, backend.ErrInvalidState):
				t.Fatalf("cancel job %d: %v", n, err)
			}
		}
	}
	cancel(0, jobs/5)
	for from := jobs / 5; from < jobs; from += batch {
		insert(from, from+batch)
		cancel(from, from+batch)
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		stats, err := be.QueueStatsAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var left, final int64
		for _, s := range stats {
			left += s.Counts[backend.StateAvailable] + s.Counts[backend.StateScheduled] + s.Counts[backend.StateRetryable] + s.Counts[backend.StateRunning]
			final += s.Counts[backend.StateCompleted] + s.Counts[backend.StateCancelled] + s.Counts[backend.StateDiscarded]
		}
		if left == 0 && final == jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs left, %d finished, of %d", left, final, jobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range kids {
		if err := k.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	readers.Wait()
	for _, k := range kids {
		if err := k.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}

	states := map[int64]backend.State{}
	for after := int64(0); ; {
		rows, err := be.JobList(ctx, &backend.JobListParams{AfterID: after, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			states[r.ID] = r.State
		}
		after = rows[len(rows)-1].ID
	}
	var lost, dupes, okRuns int
	for n := 0; n < jobs; n++ {
		state, rs := states[ids[n]], runs[n]
		fences := map[int64]bool{}
		oks := 0
		for _, r := range rs {
			if fences[r.fence] {
				t.Errorf("job %d: fence %d ran twice", n, r.fence)
			}
			fences[r.fence] = true
			if r.ok {
				oks++
			}
		}
		okRuns += oks
		want := 1
		if params[n].Args.(conformance.NoteArgs).Mode == "fail-once" {
			want = 2
		}
		switch {
		case cancelled[n]:
			if state != backend.StateCancelled {
				t.Errorf("job %d: cancelled, then %s", n, state)
			}
			if len(rs) > want || oks > 1 {
				dupes++
			}
		case state != backend.StateCompleted || oks == 0:
			lost++
			if lost < 5 {
				t.Errorf("job %d: state %s, runs %+v", n, state, rs)
			}
		case oks > 1 || len(rs) != want:
			dupes++
			if dupes < 5 {
				t.Errorf("job %d: runs %+v, want %d", n, rs, want)
			}
		}
	}
	logs := stderr.String()
	// The driver's form of the errors ("Error 1213 (40001): Deadlock found
	// …"): bare numbers would match job ids in the failure log.
	for _, sign := range []string{"Error 1213", "Error 1205", "Deadlock found", "Lock wait timeout"} {
		if strings.Contains(logs, sign) {
			t.Errorf("a lock conflict reached a client (%q):\n%s", sign, logs)
		}
	}
	t.Logf("%d jobs, %d cancelled, %d successful runs; lost %d, duplicates %d; deadlocks retried %d, lock wait timeouts retried %d, exhausted %d",
		jobs, len(cancelled), okRuns, lost, dupes, metrics[0], metrics[1], metrics[2])
	if lost != 0 || dupes != 0 || metrics[2] != 0 {
		t.Fatalf("lost %d, duplicates %d, retries exhausted %d", lost, dupes, metrics[2])
	}
}
