package scenarios

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// warmDrain drains the step's jobs a second time with the same worker
// processes, which keep their connections: the queue is paused, --jobs
// more are inserted, and the drain is timed from the resume.
//
// Why: every drain of a step used to start new processes, whose pools
// open new connections. On PostgreSQL each new backend faults in every
// page of shared memory it touches for the first time (the shared
// buffers, the WAL buffers); at 8 processes the pools hold 6 to 9
// connections each, so a 100,000-job drain of a few seconds is mostly
// new backends' first touches, which long-running workers pay once. The
// first drain keeps measuring that start (a deployment that scales out
// pays it); this one measures the same processes afterwards.
func (e *hostsEnv) warmDrain(ctx context.Context, r *bench.ScenarioRun, client *spool.Client, workers []*hostsWorker, written func() int64) (*hostsDrain, error) {
	jobs := e.load.jobs
	if err := client.QueuePause(ctx, spool.DefaultQueue); err != nil {
		return nil, err
	}
	var inserted atomic.Int64
	if _, err := bench.InsertJobs(ctx, client, spool.DefaultQueue, jobs, e.load.chunk, false, &inserted); err != nil {
		return nil, err
	}
	usage0, err := usageOf(ctx, workers)
	if err != nil {
		return nil, err
	}
	base := written()
	conns := startNewConnectionCounter(e.hosts.ServerAddr(), e.port)
	server0, faults0 := e.serverCPU(), e.serverFaults()
	start := time.Now()
	if err := client.QueueResume(ctx, spool.DefaultQueue); err != nil {
		conns.stop()
		return nil, err
	}
	bar := r.Progress("warm drain", "jobs", int64(jobs), func() int64 { return written() - base })
	err = waitWritten(ctx, workers, written, base+int64(jobs))
	bar.Stop()
	elapsed := time.Since(start)
	server1, faults1 := e.serverCPU(), e.serverFaults()
	opened := conns.stop()
	if err != nil {
		return nil, err
	}
	usage1, err := usageOf(ctx, workers)
	if err != nil {
		return nil, err
	}
	stats, err := bench.QueueStats(ctx, client, spool.DefaultQueue)
	if err != nil {
		return nil, fmt.Errorf("check the drain: %w", err)
	}
	wantCompleted := 2 * int64(jobs)
	if e.load.deleteCompleted {
		wantCompleted = 0
	}
	if bench.PendingCount(stats) != 0 || stats.Counts[backend.StateCompleted] != wantCompleted {
		return nil, fmt.Errorf("%d completions written but the queue holds %s", written(), bench.FormatCounts(stats))
	}
	rate := cli.Rate(int64(jobs), elapsed)
	return &hostsDrain{
		DrainRuns:          []float64{rate},
		DrainJobsPerS:      rate,
		ServerCPUPerJobUS:  bench.PerJobUS(server1-server0, jobs),
		ServerFaultsPerJob: float64(faults1-faults0) / float64(jobs),
		ServerCPUShare:     (server1 - server0).Seconds() / (elapsed.Seconds() * float64(e.serverCPUs)),
		ClientCPUPerJobUS:  bench.PerJobUS(usage1.sub(usage0).cpu, jobs),
		NewConnections:     opened,
	}, nil
}

// newConnectionCounter counts, every 20 ms, the established connections
// to the server's bridge address (the hosts' only way to it) that were
// not there when it started: a pool that grows or replaces connections during a drain
// shows here (one that opens and closes a connection between two samples
// does not).
type newConnectionCounter struct {
	done chan struct{}
	n    chan int
}

func startNewConnectionCounter(server string, port int) *newConnectionCounter {
	c := &newConnectionCounter{done: make(chan struct{}), n: make(chan int, 1)}
	seen := map[string]bool{}
	first, _ := tcpRemotes(server, port)
	for _, a := range first {
		seen[a] = true
	}
	go func() {
		opened := 0
		defer func() { c.n <- opened }()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-tick.C:
			}
			now, err := tcpRemotes(server, port)
			if err != nil {
				continue
			}
			for _, a := range now {
				if !seen[a] {
					seen[a] = true
					opened++
				}
			}
		}
	}()
	return c
}

// stop ends the counting and returns the connections opened meanwhile.
func (c *newConnectionCounter) stop() int {
	close(c.done)
	return <-c.n
}

// hostsFaultProbe returns what a minor page fault costs this machine now,
// in µs of CPU: the least, over three tries, of the time this thread takes
// to touch each 4 kB page of a new 16 MB shared anonymous mapping (the
// kind PostgreSQL keeps its shared memory in), over the faults counted.
// On the guest these benches run on, the cost moved between about 1 and
// 10–17 µs over a day with nothing else changing, and PostgreSQL's
// processes at 8 worker processes fault about once a job: the figure says
// which state the guest was in.
func hostsFaultProbe() (float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const size = 16 << 20
	page := syscall.Getpagesize()
	best := -1.0
	for range 3 {
		mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON)
		if err != nil {
			return 0, fmt.Errorf("fault probe: mmap: %w", err)
		}
		var before, after syscall.Rusage
		err = syscall.Getrusage(rusageThread, &before)
		for i := 0; i < size; i += page {
			mem[i] = 1
		}
		if err == nil {
			err = syscall.Getrusage(rusageThread, &after)
		}
		if uerr := syscall.Munmap(mem); err == nil {
			err = uerr
		}
		if err != nil {
			return 0, fmt.Errorf("fault probe: %w", err)
		}
		faults := after.Minflt - before.Minflt
		cpu := time.Duration(syscall.TimevalToNsec(after.Utime) + syscall.TimevalToNsec(after.Stime) -
			syscall.TimevalToNsec(before.Utime) - syscall.TimevalToNsec(before.Stime))
		if faults <= 0 {
			continue
		}
		us := float64(cpu.Nanoseconds()) / 1e3 / float64(faults)
		if best < 0 || us < best {
			best = us
		}
	}
	return max(best, 0), nil
}

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage.
const rusageThread = 1
