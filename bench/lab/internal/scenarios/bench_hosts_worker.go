package scenarios

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/internal/testkit/netns"
)

// A lab hosts worker process: one client over the store, run in a
// simulated host, controlled by its parent through lines on stdin and
// reporting through lines on stdout:
//
//	parent → worker: "go" starts the client; "cpu" asks for this process's
//	CPU time; end of input stops the client softly and ends the process.
//	worker → parent: "ready" once the store answers; "done N" whenever the
//	completions this process wrote reach N; "cpu NS CLAIMS EMPTY CLAIMED
//	CLAIMNS FINISHES FINISHNS" (its CPU time, claim calls, claims that
//	found nothing, jobs claimed, time spent in claim calls, outcome writes
//	and time spent in them); "start SEQ UNIXNS ATTEMPTNS RETURNEDNS" when
//	a pickup job's handler starts (ATTEMPTNS: its attempted_at, the
//	server's time at the claim's SELECT; RETURNEDNS: when the claim call
//	that took it returned, 0 if unknown); "error MSG" before a failure
//	exit.

// hostsLines writes a worker's report lines, buffered and flushed every few
// milliseconds, so that a handler start costs no system call of its own.
type hostsLines struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *hostsLines) printf(format string, args ...any) {
	l.mu.Lock()
	fmt.Fprintf(l.w, format+"\n", args...)
	l.mu.Unlock()
}

func (l *hostsLines) flush() {
	l.mu.Lock()
	_ = l.w.Flush()
	l.mu.Unlock()
}

// runHostsWorker is lab hosts --worker.
func runHostsWorker(ctx context.Context, stdin io.Reader, stdout io.Writer, url string, q *bench.QueueFlags) (err error) {
	out := &hostsLines{w: bufio.NewWriterSize(stdout, 64<<10)}
	defer func() {
		if err != nil {
			out.printf("error %v", err)
		}
		out.flush()
	}()
	be, err := backend.Open(ctx, url)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer be.Close()
	claims := &claimCounter{Backend: be, Capabilities: bench.Capabilities{Of: be}}
	be, counter := bench.CountCompletions(bench.KeepNotifier(claims, be), 1<<62)
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(context.Context, *spool.Job[bench.Noop]) error { return nil })); err != nil {
		return err
	}
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[bench.SteadyArgs]) error {
		now := time.Now().UnixNano()
		var attempted, returned int64
		if j.AttemptedAt != nil {
			attempted = j.AttemptedAt.UnixNano()
		}
		if v, ok := claims.returned.LoadAndDelete(j.ID); ok {
			returned = v.(int64)
		}
		out.printf("start %d %d %d %d", j.Args.Seq, now, attempted, returned)
		return nil
	})); err != nil {
		return err
	}
	cfg := q.Config()
	cfg.Workers, cfg.Logger = ws, bench.Logger(os.Stderr)
	client, err := spool.NewClient(be, &cfg)
	if err != nil {
		return err
	}
	out.printf("ready")
	out.flush()

	// Report progress until the client has stopped.
	reported := make(chan struct{})
	stopReports := make(chan struct{})
	go func() {
		defer close(reported)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		last := int64(-1)
		for {
			select {
			case <-stopReports:
				if n := counter.Written(); n != last {
					out.printf("done %d", n)
				}
				out.flush()
				return
			case <-tick.C:
			}
			if n := counter.Written(); n != last {
				out.printf("done %d", n)
				last = n
			}
			out.flush()
		}
	}()
	defer func() {
		close(stopReports)
		<-reported
	}()

	started := false
	in := bufio.NewScanner(stdin)
	for in.Scan() {
		switch in.Text() {
		case "go":
			if started {
				continue
			}
			if err := client.Start(ctx); err != nil {
				return fmt.Errorf("start client: %w", err)
			}
			started = true
		case "cpu":
			cpu, _ := bench.ProcessCPU()
			out.printf("cpu %d %d %d %d %d %d %d", cpu.Nanoseconds(), claims.calls.Load(), claims.empty.Load(),
				claims.claimed.Load(), claims.claimNS.Load(), claims.finishes.Load(), claims.finishNS.Load())
			out.flush()
		default:
			return fmt.Errorf("unknown command %q from the parent", in.Text())
		}
	}
	if started {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			return fmt.Errorf("stop client: %w", err)
		}
	}
	return nil
}

// claimCounter counts a worker's claim calls, and those that found no job:
// with several processes, a wake-up that every process answers shows as
// empty claims. It also counts the jobs claimed and the outcome writes,
// and the time spent in each kind of call: statements per job are what
// more processes can add to the server's work.
type claimCounter struct {
	backend.Backend
	bench.Capabilities
	calls, empty, claimed, claimNS atomic.Int64
	finishes, finishNS             atomic.Int64
	// returned holds, by job id, when the claim call that took the job
	// returned (Unix ns), until its handler starts and reads it.
	returned sync.Map
}

// JobClaim implements backend.Backend.
func (c *claimCounter) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	start := time.Now()
	rows, err := c.Backend.JobClaim(ctx, p)
	end := time.Now()
	c.claimNS.Add(int64(end.Sub(start)))
	for _, r := range rows {
		if r.Kind == (bench.SteadyArgs{}).Kind() {
			c.returned.Store(r.ID, end.UnixNano())
		}
	}
	c.calls.Add(1)
	c.claimed.Add(int64(len(rows)))
	if err == nil && len(rows) == 0 {
		c.empty.Add(1)
	}
	return rows, err
}

// JobFinishMany implements backend.Backend.
func (c *claimCounter) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	start := time.Now()
	res, err := c.Backend.JobFinishMany(ctx, p)
	c.finishNS.Add(int64(time.Since(start)))
	c.finishes.Add(1)
	return res, err
}

// workerUsage is what a worker reports of itself: CPU time and claims.
type workerUsage struct {
	cpu                    time.Duration
	claims, empty, claimed int64
	claimTime              time.Duration
	finishes               int64
	finishTime             time.Duration
}

func (u workerUsage) sub(v workerUsage) workerUsage {
	return workerUsage{cpu: u.cpu - v.cpu, claims: u.claims - v.claims, empty: u.empty - v.empty, claimed: u.claimed - v.claimed,
		claimTime: u.claimTime - v.claimTime, finishes: u.finishes - v.finishes, finishTime: u.finishTime - v.finishTime}
}

func (u workerUsage) add(v workerUsage) workerUsage {
	return workerUsage{cpu: u.cpu + v.cpu, claims: u.claims + v.claims, empty: u.empty + v.empty, claimed: u.claimed + v.claimed,
		claimTime: u.claimTime + v.claimTime, finishes: u.finishes + v.finishes, finishTime: u.finishTime + v.finishTime}
}

// hostsWorker is the parent's view of one worker process.
type hostsWorker struct {
	host  int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  atomic.Int64
	ready chan struct{}
	usage chan workerUsage
	// exited is closed when the process has ended and its output is read;
	// err is then why it failed, if it did.
	exited chan struct{}
	err    error
}

// startHostsWorker starts a worker in host i of hosts, feeding handler
// starts to rec (set before the pickup phase) through onStart; cpus, when
// set, is the CPU list it runs on.
func startHostsWorker(hosts *netns.Hosts, i int, self string, args []string, cpus string, stderr io.Writer, onStart func(seq int64, at time.Time, attemptedNS, returnedNS int64)) (*hostsWorker, error) {
	cmd := hosts.Command(i, self, args...)
	if cpus != "" {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("--pin needs taskset (util-linux): %w", err)
		}
		cmd.Path, cmd.Args = taskset, append([]string{"taskset", "-c", cpus}, cmd.Args...)
	}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker on host %d: %w", i, err)
	}
	w := &hostsWorker{host: i, cmd: cmd, stdin: stdin, ready: make(chan struct{}), usage: make(chan workerUsage, 1), exited: make(chan struct{})}
	go func() {
		defer close(w.exited)
		var failure string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			word, rest, _ := strings.Cut(sc.Text(), " ")
			switch word {
			case "ready":
				close(w.ready)
			case "done":
				n, _ := strconv.ParseInt(rest, 10, 64)
				w.done.Store(n)
			case "cpu":
				var u workerUsage
				var ns, claimNS, finishNS int64
				if _, err := fmt.Sscan(rest, &ns, &u.claims, &u.empty, &u.claimed, &claimNS, &u.finishes, &finishNS); err != nil {
					failure = fmt.Sprintf("unreadable report %q: %v", sc.Text(), err)
					continue
				}
				u.cpu, u.claimTime, u.finishTime = time.Duration(ns), time.Duration(claimNS), time.Duration(finishNS)
				w.usage <- u
			case "start":
				f := strings.Fields(rest)
				field := func(i int) int64 {
					if i >= len(f) {
						return 0
					}
					v, _ := strconv.ParseInt(f[i], 10, 64)
					return v
				}
				if len(f) >= 2 {
					onStart(field(0), time.Unix(0, field(1)), field(2), field(3))
				}
			case "error":
				failure = rest
			}
		}
		werr := cmd.Wait()
		switch {
		case failure != "":
			w.err = fmt.Errorf("worker on host %d: %s", i, failure)
		case werr != nil:
			w.err = fmt.Errorf("worker on host %d: %w", i, werr)
		}
	}()
	return w, nil
}

// send writes a command line to the worker.
func (w *hostsWorker) send(line string) error {
	if _, err := io.WriteString(w.stdin, line+"\n"); err != nil {
		return fmt.Errorf("worker on host %d: send %q: %w", w.host, line, err)
	}
	return nil
}

// waitReady waits for the worker's "ready", or its exit.
func (w *hostsWorker) waitReady(ctx context.Context) error {
	select {
	case <-w.ready:
		return nil
	case <-w.exited:
		if w.err != nil {
			return w.err
		}
		return fmt.Errorf("worker on host %d ended before it was ready", w.host)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// askUsage returns the worker's CPU time and claims so far.
func (w *hostsWorker) askUsage(ctx context.Context) (workerUsage, error) {
	if err := w.send("cpu"); err != nil {
		return workerUsage{}, err
	}
	select {
	case u := <-w.usage:
		return u, nil
	case <-w.exited:
		return workerUsage{}, fmt.Errorf("worker on host %d ended: %v", w.host, w.err)
	case <-ctx.Done():
		return workerUsage{}, ctx.Err()
	}
}

// usageOf asks every worker for its usage and returns the sum.
func usageOf(ctx context.Context, workers []*hostsWorker) (workerUsage, error) {
	var sum workerUsage
	for _, w := range workers {
		u, err := w.askUsage(ctx)
		if err != nil {
			return workerUsage{}, err
		}
		sum = sum.add(u)
	}
	return sum, nil
}

// stop closes the worker's input, which stops its client softly, and waits
// for it to end; after 60 s it is killed.
func (w *hostsWorker) stop() error {
	_ = w.stdin.Close()
	select {
	case <-w.exited:
	case <-time.After(60 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.exited
		return fmt.Errorf("worker on host %d did not stop within 60 s; killed", w.host)
	}
	return w.err
}
