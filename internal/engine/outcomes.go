package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
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
	// deps takes the outcomes of jobs with dependents when the store
	// settles them on writers of their own (backend.SettleWriters):
	// the settlers' loops write them, each its own batches, beside the loop
	// over in. A finish that releases a large fan-out is then one long
	// write on one of them, while the others go on writing, among them
	// the outcomes of the tasks its first parts released. nil otherwise:
	// every outcome goes to in.
	deps     chan pendingFinish
	settlers int
	done     chan struct{}
	// abandonCtx is cancelled when a stop runs out of time: writes still
	// failing then are given up at once instead of retried.
	abandonCtx context.Context
	abandon    context.CancelFunc
	// unwritten lists the jobs whose outcome was given up after abandon:
	// the stop that ran out of time reports them (GaveUpError.Unwritten).
	unwrittenMu sync.Mutex
	unwritten   []int64

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
	// unwrittenSince is when part of the store (one database of a sharded
	// backend) first failed to write this outcome; zero until then.
	unwrittenSince time.Time
}

func newOutcomeWriter(be backend.Backend, cfg *Config, logger *slog.Logger, running *runningJobs, due func(queue string, at time.Time), freed func(queue string)) *outcomeWriter {
	ctx, cancel := context.WithCancel(context.Background())
	anyFlow := false
	for _, q := range cfg.Queues {
		anyFlow = anyFlow || q.Flow != nil
	}
	settlers := 0
	if sw, ok := be.(backend.SettleWriters); ok {
		settlers = sw.SettleWriters()
	}
	var deps chan pendingFinish
	if settlers > 0 {
		deps = make(chan pendingFinish, 4*cfg.CompletionBatchMax)
	}
	return &outcomeWriter{
		deps:       deps,
		settlers:   settlers,
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
// It reports false, dropping the outcome, as addRun.
func (m *outcomeWriter) add(f backend.JobFinish) bool {
	return m.addRun(f, "", nil, false)
}

// addRun queues an outcome of a job of queue; run describes the handler's
// run that produced it (nil: none did); rejectExpected marks one the store
// is expected to fence out. It reports false, dropping the outcome, once
// the writer is closed or a stop has given up on writing (abandon): only
// a handler the stop gave up waiting for adds that late.
func (m *outcomeWriter) addRun(f backend.JobFinish, queue string, run *runInfo, rejectExpected bool) bool {
	return m.send(m.in, f, queue, run, rejectExpected)
}

// addRunOf queues the outcome of a run of row, as addRun, on the settlers'
// queue when row has dependents and the store has settlers.
func (m *outcomeWriter) addRunOf(row *backend.JobRow, f backend.JobFinish, run *runInfo, rejectExpected bool) bool {
	in := m.in
	if row.HasDependents && m.deps != nil {
		in = m.deps
	}
	return m.send(in, f, row.Queue, run, rejectExpected)
}

// send queues an outcome on in (m.in or m.deps): see addRun.
func (m *outcomeWriter) send(in chan pendingFinish, f backend.JobFinish, queue string, run *runInfo, rejectExpected bool) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return false
	}
	p := pendingFinish{finish: f, queue: queue, rejectExpected: rejectExpected}
	if run != nil {
		p.run, p.ran = *run, true
	}
	// A send that need not wait skips the three-way select, which locks
	// three channels for every outcome (BENCHMARKS.md, "Client CPU per
	// job, and the drain targets on longer runs"). When the queue has room
	// the select below could pick the send anyway, abandoned or closing or
	// not.
	select {
	case in <- p:
		return true
	default:
	}
	select {
	case in <- p:
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
		if m.deps != nil {
			close(m.deps)
		}
	}
}

// run writes the outcomes queued until close, then closes done: the
// settlers' loops over deps beside the loop over in.
func (m *outcomeWriter) run() {
	defer close(m.done)
	var wg sync.WaitGroup
	for range m.settlers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.loop(m.deps)
		}()
	}
	m.loop(m.in)
	wg.Wait()
}

// loop writes the outcomes queued on in, in batches, until in is closed
// and every outcome taken from it is written or given up.
func (m *outcomeWriter) loop(in chan pendingFinish) {
	cfg := m.cfg
	batch := make([]pendingFinish, 0, cfg.CompletionBatchMax)
	var bufs writeBufs
	// later holds outcomes that part of the store could not write (one
	// database of a sharded backend): they are retried with the next
	// batch after a backoff, so that the rest of the store's outcomes are
	// not held up behind them.
	var (
		later      []pendingFinish
		laterAt    time.Time
		laterWait  = 50 * time.Millisecond
		laterTimer = time.NewTimer(time.Hour)
	)
	laterTimer.Stop()
	defer laterTimer.Stop()
	open := true
	for open || len(later) > 0 {
		batch = batch[:0]
		if len(later) > 0 {
			laterTimer.Reset(time.Until(laterAt))
		}
		var from <-chan pendingFinish
		if open {
			from = in
		}
		var abandoned <-chan struct{}
		if len(later) > 0 {
			abandoned = m.abandonCtx.Done()
		}
		select {
		case first, ok := <-from:
			if !ok {
				open = false
			} else {
				batch = append(batch, first)
			}
		case <-laterTimer.C:
		case <-abandoned:
			m.giveUp(later, errors.New("the stop ran out of time"))
			later = nil
		}
		laterTimer.Stop()
		if len(later) > 0 && !time.Now().Before(laterAt) {
			batch = append(batch, later...)
			later = nil
		}
		if len(batch) == 0 {
			continue
		}
		if cfg.CompletionDelay > 0 && open {
			timer := time.NewTimer(cfg.CompletionDelay)
		collect:
			for len(batch) < cfg.CompletionBatchMax {
				select {
				case f, ok := <-in:
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
			case f, ok := <-in:
				if !ok {
					open = false
					break drain
				}
				batch = append(batch, f)
			default:
				break drain
			}
		}
		rest := m.write(batch, &bufs)
		if len(rest) == 0 {
			laterWait = 50 * time.Millisecond
			continue
		}
		later = append(later, rest...)
		laterAt = time.Now().Add(jitter(laterWait))
		laterWait = min(laterWait*2, maxRetryBackoff)
	}
}

// writeBufs are the slices a loop's writes fill for each batch, kept from
// one batch to the next: the store reads them only during its call, and a
// batch of outcomes allocated afresh cost a drain about a hundred bytes a
// job (docs/benchmarks/2026-12-02.md, "The runtime's cost per job").
type writeBufs struct {
	finishes []backend.JobFinish
	leases   []backend.LeaseRef
}

// write writes one batch, retrying with backoff on errors, and returns the
// outcomes that part of the store could not write (JobFinishManyResult's
// Unwritten), to be retried later. The write does not use the stop's
// context: a stop must not cut off outcomes that are ready to be written
// while it has time. It gives up after about a minute of failures (the
// leases of those jobs have ended by then anyway), or at once, even in the
// middle of a write, when the stop has run out of time.
func (m *outcomeWriter) write(batch []pendingFinish, bufs *writeBufs) (later []pendingFinish) {
	finishes := slices.Grow(bufs.finishes[:0], len(batch))[:len(batch)]
	for i, p := range batch {
		finishes[i] = p.finish
	}
	defer func() {
		clear(finishes) // the errors and step records they point to
		bufs.finishes = finishes[:0]
	}()
	params := &backend.JobFinishManyParams{Finishes: finishes, DeleteCompleted: m.cfg.DeleteCompleted}
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(m.abandonCtx, 30*time.Second)
		res, err := m.be.JobFinishMany(ctx, params)
		cancel()
		if err == nil && len(res.Unwritten) == 0 {
			m.settle(batch, finishes, res.Rejected, attempt > 1, bufs)
			return nil
		}
		if err == nil {
			done, rest := splitUnwritten(batch, res.Unwritten)
			m.settle(done, nil, res.Rejected, attempt > 1, bufs)
			return m.keepUnwritten(rest, res.Err)
		}
		if time.Now().After(deadline) || m.abandonCtx.Err() != nil {
			m.giveUp(batch, err)
			return nil
		}
		m.logger.Warn(retryMessage(err), "jobs", len(batch), "write", backend.WriteFate(err), "error", err, "retry_in", backoff)
		sleepCtx(m.abandonCtx, jitter(backoff))
		backoff = min(backoff*2, maxRetryBackoff)
	}
}

// keepUnwritten returns the outcomes part of the store could not write, to
// retry, giving up those that have failed for a minute.
func (m *outcomeWriter) keepUnwritten(rest []pendingFinish, err error) []pendingFinish {
	if len(rest) == 0 {
		return nil
	}
	now := time.Now()
	keep := rest[:0:0]
	var expired []pendingFinish
	for _, p := range rest {
		if p.unwrittenSince.IsZero() {
			p.unwrittenSince = now
		}
		if now.Sub(p.unwrittenSince) > time.Minute {
			expired = append(expired, p)
		} else {
			keep = append(keep, p)
		}
	}
	if len(expired) > 0 {
		m.giveUp(expired, err)
	}
	if m.abandonCtx.Err() != nil && len(keep) > 0 {
		m.giveUp(keep, err)
		return nil
	}
	if len(keep) > 0 {
		m.logger.Warn("spool: part of the store could not write job outcomes; the rest were written, these are retried",
			"jobs", len(keep), "write", backend.WriteFate(err), "error", err)
	}
	return keep
}

// retryMessage is the warning of a failed outcome write that is retried,
// saying what the error tells of the write: a retry of a write that did
// commit changes nothing (its fences no longer match) and is reported as
// already applied (reportRejected).
func retryMessage(err error) string {
	switch backend.WriteFate(err) {
	case backend.FateNotWritten:
		return "spool: job outcomes not written: the database connection failed before they could commit; retrying"
	case backend.FateOutcomeUnknown:
		return "spool: job outcomes may or may not have been written: the database connection failed after they were sent; " +
			"retrying (the jobs' fences make a second write of an applied outcome change nothing)"
	default:
		return "spool: writing job outcomes failed; retrying"
	}
}

// giveUp drops outcomes that could not be written.
func (m *outcomeWriter) giveUp(batch []pendingFinish, err error) {
	msg := "spool: giving up writing job outcomes; their jobs will be rescued when their leases end"
	if backend.WriteFate(err) == backend.FateOutcomeUnknown {
		msg = "spool: giving up writing job outcomes, which may or may not have been written (the database connection " +
			"failed after they were sent); the jobs whose outcome was not written will be rescued when their leases end"
	}
	m.logger.Error(msg, "jobs", len(batch), "write", backend.WriteFate(err), "error", err)
	leases := make([]backend.LeaseRef, len(batch))
	for i, p := range batch {
		leases[i] = p.finish.Lease
	}
	if m.abandonCtx.Err() != nil {
		m.unwrittenMu.Lock()
		for _, l := range leases {
			m.unwritten = append(m.unwritten, l.ID)
		}
		m.unwrittenMu.Unlock()
	}
	m.running.remove(leases)
}

// abandoned returns the jobs whose outcome was given up because a stop ran
// out of time (abandon); complete once done is closed.
func (m *outcomeWriter) abandoned() []int64 {
	m.unwrittenMu.Lock()
	defer m.unwrittenMu.Unlock()
	return slices.Clone(m.unwritten)
}

// settle finishes the bookkeeping of outcomes the store wrote or rejected;
// finishes are batch's, or nil to collect them.
func (m *outcomeWriter) settle(batch []pendingFinish, finishes []backend.JobFinish, rejected []backend.LeaseRef, retried bool, bufs *writeBufs) {
	if finishes == nil {
		finishes = make([]backend.JobFinish, len(batch))
		for i, p := range batch {
			finishes[i] = p.finish
		}
	}
	m.reportRejected(batch, rejected, retried)
	leases := bufs.leases[:0]
	for _, f := range finishes {
		leases = append(leases, f.Lease)
	}
	m.running.remove(leases)
	bufs.leases = leases[:0]
	m.wakeForDue(batch)
	m.reportApplied(batch, rejected)
}

// splitUnwritten splits batch into the outcomes that are not in unwritten
// and those that are.
func splitUnwritten(batch []pendingFinish, unwritten []backend.LeaseRef) (done, rest []pendingFinish) {
	left := make(map[backend.LeaseRef]bool, len(unwritten))
	for _, l := range unwritten {
		left[l] = true
	}
	for _, p := range batch {
		if left[p.finish.Lease] {
			rest = append(rest, p)
		} else {
			done = append(done, p)
		}
	}
	return done, rest
}

// wakeForDue sets local wake-ups for the retries, snoozes and releases
// just written (a release names its queue only when the producer handed
// back jobs it could not start in time), so they run when due rather than
// at the next poll after, and wakes the producers of flow-controlled
// queues: an outcome written frees a slot their rules count.
func (m *outcomeWriter) wakeForDue(batch []pendingFinish) {
	now := time.Now()
	woke := ""
	for _, p := range batch {
		if m.anyFlow && p.queue != "" && p.queue != woke && m.cfg.Queues[p.queue].Flow != nil {
			m.freed(p.queue)
			woke = p.queue
		}
		o := p.finish.Outcome
		if (o != backend.OutcomeRetry && o != backend.OutcomeSnooze && o != backend.OutcomeRelease) || p.queue == "" {
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
