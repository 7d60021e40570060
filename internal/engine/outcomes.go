package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// outcomeWriter writes job outcomes in batches: everything that arrived while the
// previous write was in flight (or within CompletionDelay) goes out in one
// statement. It retries a failed write until it succeeds or the client's stop
// gives up; an outcome that is never written leaves its job running until the
// lease ends and rescue runs it again (at-least-once).
type outcomeWriter struct {
	be      backend.Backend
	cfg     *Config
	logger  *slog.Logger
	running *runningJobs
	// due is told when a retry or snooze just written comes due, so its
	// queue's producer can look for it then rather than at the next poll.
	due func(queue string, at time.Time)
	// freed wakes the producer of a flow-controlled queue at once: an
	// outcome written frees a slot its rules count.
	freed func(queue string)
	// anyFlow is set when some queue has a Flow.
	anyFlow bool
	in      chan pendingFinish
	done    chan struct{}
	// abandonCtx is cancelled when a stop runs out of time: writes still
	// failing then are given up at once instead of retried.
	abandonCtx context.Context
	abandon    context.CancelFunc

	// mu guards closed against a send on the closed channel: after a stop
	// gave up on a handler that ignores its context, that handler may still
	// return and hand in its outcome.
	mu     sync.RWMutex
	closed bool
	// closing is closed as close begins, so that a late add blocked on a
	// full queue gives up instead of holding close off.
	closing   chan struct{}
	closeOnce sync.Once
}

type pendingFinish struct {
	finish backend.JobFinish
	queue  string // the job's queue, to wake its producer when a retry is due
	// run describes the handler's run that produced the outcome, for
	// Config.Outcome, when ran is set (a value, not a pointer: no
	// allocation per job).
	run runInfo
	ran bool
	// rejectExpected: the handler called CompleteTx, or its lease was found
	// lost; a rejection of this outcome is no news.
	rejectExpected bool
}

func newOutcomeWriter(be backend.Backend, cfg *Config, logger *slog.Logger, running *runningJobs, due func(queue string, at time.Time), freed func(queue string)) *outcomeWriter {
	ctx, cancel := context.WithCancel(context.Background())
	anyFlow := false
	for _, q := range cfg.Queues {
		anyFlow = anyFlow || q.Flow != nil
	}
	return &outcomeWriter{
		anyFlow:    anyFlow,
		be:         be,
		cfg:        cfg,
		logger:     logger,
		running:    running,
		due:        due,
		freed:      freed,
		in:         make(chan pendingFinish, 4*cfg.CompletionBatchMax),
		done:       make(chan struct{}),
		closing:    make(chan struct{}),
		abandonCtx: ctx,
		abandon:    cancel,
	}
}

// runInfo describes a handler's run.
type runInfo struct {
	kind, queue          string
	attempt, maxAttempts int16
	duration             time.Duration
}

// add queues an outcome; it blocks when the queue is full, which holds the
// job's worker slot and so slows claiming to the rate outcomes are written.
func (m *outcomeWriter) add(f backend.JobFinish) {
	m.addRun(f, "", nil, false)
}

// addRun queues an outcome of a job of queue; run describes the handler's
// run that produced it (nil: none did); rejectExpected marks one the store
// is expected to fence out. It reports false, dropping the outcome, once
// the writer is closed or a stop has given up on writing (abandon): only
// a handler the stop gave up waiting for adds that late.
func (m *outcomeWriter) addRun(f backend.JobFinish, queue string, run *runInfo, rejectExpected bool) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return false
	}
	p := pendingFinish{finish: f, queue: queue, rejectExpected: rejectExpected}
	if run != nil {
		p.run, p.ran = *run, true
	}
	select {
	case m.in <- p:
		return true
	case <-m.abandonCtx.Done():
		return false
	case <-m.closing:
		return false
	}
}

// close is called once every producer has exited, or a stop has given up
// on them: nothing is queued after it.
func (m *outcomeWriter) close() {
	m.closeOnce.Do(func() { close(m.closing) })
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		close(m.in)
	}
}

func (m *outcomeWriter) run() {
	defer close(m.done)
	cfg := m.cfg
	batch := make([]pendingFinish, 0, cfg.CompletionBatchMax)
	for {
		first, ok := <-m.in
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		open := true
		if cfg.CompletionDelay > 0 {
			timer := time.NewTimer(cfg.CompletionDelay)
		collect:
			for len(batch) < cfg.CompletionBatchMax {
				select {
				case f, ok := <-m.in:
					if !ok {
						open = false
						break collect
					}
					batch = append(batch, f)
				case <-timer.C:
					break collect
				}
			}
			timer.Stop()
		}
	drain:
		for open && len(batch) < cfg.CompletionBatchMax {
			select {
			case f, ok := <-m.in:
				if !ok {
					open = false
					break drain
				}
				batch = append(batch, f)
			default:
				break drain
			}
		}
		m.write(batch)
		if !open {
			return
		}
	}
}

// write writes one batch, retrying with backoff on errors. The write does not
// use the stop's context: a stop must not cut off outcomes that are ready to
// be written while it has time. It gives up after about a minute of failures
// (the leases of those jobs have ended by then anyway), or at once, even in
// the middle of a write, when the stop has run out of time.
func (m *outcomeWriter) write(batch []pendingFinish) {
	finishes := make([]backend.JobFinish, len(batch))
	for i, p := range batch {
		finishes[i] = p.finish
	}
	params := &backend.JobFinishManyParams{Finishes: finishes, DeleteCompleted: m.cfg.DeleteCompleted}
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(m.abandonCtx, 30*time.Second)
		res, err := m.be.JobFinishMany(ctx, params)
		cancel()
		if err == nil {
			m.reportRejected(batch, res.Rejected, attempt > 1)
			m.running.remove(leasesOf(finishes))
			m.wakeForDue(batch)
			m.reportApplied(batch, res.Rejected)
			return
		}
		if time.Now().After(deadline) || m.abandonCtx.Err() != nil {
			m.logger.Error("spool: giving up writing job outcomes; their jobs will be rescued when their leases end",
				"jobs", len(batch), "error", err)
			m.running.remove(leasesOf(finishes))
			return
		}
		m.logger.Warn("spool: writing job outcomes failed; retrying", "jobs", len(batch), "error", err, "retry_in", backoff)
		sleepCtx(m.abandonCtx, jitter(backoff))
		backoff = min(backoff*2, maxRetryBackoff)
	}
}

// wakeForDue sets local wake-ups for the retries and snoozes just written,
// so they run when due rather than at the next poll after, and wakes the
// producers of flow-controlled queues: an outcome written frees a slot their
// rules count.
func (m *outcomeWriter) wakeForDue(batch []pendingFinish) {
	now := time.Now()
	woke := ""
	for _, p := range batch {
		if m.anyFlow && p.queue != "" && p.queue != woke && m.cfg.Queues[p.queue].Flow != nil {
			m.freed(p.queue)
			woke = p.queue
		}
		o := p.finish.Outcome
		if (o != backend.OutcomeRetry && o != backend.OutcomeSnooze) || p.queue == "" {
			continue
		}
		m.due(p.queue, now.Add(p.finish.Delay))
	}
}

// reportApplied hands the applied outcomes of handlers' runs to
// Config.Outcome.
func (m *outcomeWriter) reportApplied(batch []pendingFinish, rejected []backend.LeaseRef) {
	if m.cfg.Outcome == nil {
		return
	}
	var skip map[backend.LeaseRef]bool
	if len(rejected) > 0 {
		skip = make(map[backend.LeaseRef]bool, len(rejected))
		for _, l := range rejected {
			skip[l] = true
		}
	}
	for _, p := range batch {
		if !p.ran || skip[p.finish.Lease] {
			continue
		}
		m.cfg.Outcome(Outcome{Result: ResultOf(&p.finish, p.run.attempt, p.run.maxAttempts), Finish: p.finish, Kind: p.run.kind, Queue: p.run.queue, Attempt: p.run.attempt,
			MaxAttempts: p.run.maxAttempts, Duration: p.run.duration})
	}
}

func leasesOf(fs []backend.JobFinish) []backend.LeaseRef {
	out := make([]backend.LeaseRef, len(fs))
	for i, f := range fs {
		out[i] = f.Lease
	}
	return out
}

// reportRejected logs outcomes the store fenced out, except those whose
// rejection is expected (CompleteTx, or a lease already known lost). After a retried write
// a rejection usually means an earlier try committed but its reply was lost
// (the fence made the retry a no-op), so it is not reported as a lost lease.
func (m *outcomeWriter) reportRejected(batch []pendingFinish, rejected []backend.LeaseRef, retried bool) {
	if len(rejected) == 0 {
		return
	}
	expected := make(map[backend.LeaseRef]bool, len(batch))
	for _, p := range batch {
		if p.rejectExpected {
			expected[p.finish.Lease] = true
		}
	}
	for _, l := range rejected {
		switch {
		case expected[l]:
		case retried:
			m.logger.Info("spool: outcome already applied or lease lost: an earlier try of this write may have committed before its reply was lost",
				"job_id", l.ID, "fence", l.Fence)
		default:
			m.logger.Warn("spool: outcome not written: the job's lease no longer holds (rescued, cancelled or finished elsewhere)",
				"job_id", l.ID, "fence", l.Fence)
		}
	}
}
