package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// heartbeat extends the leases of the jobs in the running set, cancels the
// handlers whose lease is gone, and records a retry for handlers that
// overran their timeout and ignore their context.
type heartbeat struct {
	be      backend.Backend
	cfg     *Config
	logger  *slog.Logger
	running *runningJobs
	// beatNow asks the loop for an immediate beat (capacity 1).
	beatNow chan struct{}
	// slow rate-limits the warnings about slow heartbeats.
	slow slowNotes
}

func newHeartbeat(be backend.Backend, cfg *Config, logger *slog.Logger, running *runningJobs) *heartbeat {
	return &heartbeat{be: be, cfg: cfg, logger: logger, running: running, beatNow: make(chan struct{}, 1)}
}

// now asks for a heartbeat at once, e.g. because a job this client holds
// was cancelled.
func (h *heartbeat) now() {
	select {
	case h.beatNow <- struct{}{}:
	default:
	}
}

// maxBeatsInFlight bounds the heartbeats out at once. A beat is sent every
// third of the lease whether or not the last one has landed, so one slow
// beat does not hold the next back: with two out, beats keep a lease for as
// long as each lands within two thirds of it; one at a time, within half.
const maxBeatsInFlight = 2

// run extends the leases of held jobs every third of the lease (or at once
// when asked), in one write, and cancels the handlers whose lease is gone.
//
// A beat in flight is never cut off while a lease it carries can still be
// extended: it may take until the latest of their known ends (heldUntil).
// On a slow database, cutting it sooner loses a beat that would have
// landed, and closes a connection the next beat must open again. A lease is
// lost only when a beat's answer says so, or when it has ended with no
// beat landed (the running set's timer then cancels the handler).
func (h *heartbeat) run(ctx context.Context) {
	interval := h.cfg.LeaseDuration / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	var (
		inFlight sync.WaitGroup
		out      atomic.Int32
	)
	defer inFlight.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.beatNow:
		}
		h.abandonOverrun(ctx, interval)
		leases := h.running.live()
		if len(leases) == 0 {
			continue
		}
		if out.Load() >= maxBeatsInFlight {
			h.slow.note(h.logger, "spool: heartbeats are slower than the lease allows: the last beats have not landed, so this one is not sent; leases whose end passes before one lands are given up", "in_flight", maxBeatsInFlight, "lease", h.cfg.LeaseDuration)
			continue
		}
		out.Add(1)
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			explain := h.beat(ctx, leases, interval)
			// The beat's slot is free once its answer is applied: the
			// lost leases' causes are read and logged after it.
			out.Add(-1)
			if explain != nil {
				explain()
			}
		}()
	}
}

// beat sends one heartbeat for leases and applies its answer. It returns
// the work that reads and logs why leases were lost, if any were, to be
// run after the beat has given up its slot.
func (h *heartbeat) beat(ctx context.Context, leases []backend.LeaseRef, interval time.Duration) (explain func()) {
	sentAt := time.Now()
	hbCtx, cancel := h.untilLeasesEnd(ctx, leases, sentAt.Add(h.cfg.LeaseDuration-interval))
	res, err := h.be.JobHeartbeatMany(hbCtx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: h.cfg.LeaseDuration})
	tooLate := errors.Is(context.Cause(hbCtx), errBeatTooLate)
	cancel()
	took := time.Since(sentAt)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case tooLate:
			h.logger.Warn("spool: heartbeat given up: the database had not answered when the leases it carried ended", "jobs", len(leases), "took", took.Round(time.Millisecond), "lease", h.cfg.LeaseDuration, "write", backend.WriteFate(err), "error", err)
		case errors.Is(err, backend.ErrOutcomeUnknown):
			h.logger.Warn("spool: heartbeat's reply lost: the leases may or may not have been extended; the next beat tries again", "jobs", len(leases), "took", took.Round(time.Millisecond), "write", backend.WriteFate(err), "error", err)
		default:
			h.logger.Warn("spool: heartbeat failed; leases not extended", "jobs", len(leases), "took", took.Round(time.Millisecond), "write", backend.WriteFate(err), "error", err)
		}
		return nil
	}
	if took > interval && ctx.Err() == nil {
		h.slow.note(h.logger, "spool: heartbeats land late: the database took longer to extend the leases than the time between beats", "took", took.Round(time.Millisecond), "between_beats", interval, "lease", h.cfg.LeaseDuration)
	}
	extended := leases
	if len(res.Lost) > 0 || len(res.Unextended) > 0 {
		extended = backend.Unapplied(leases, append(slices.Clone(res.Lost), res.Unextended...), func(l backend.LeaseRef) backend.LeaseRef { return l })
	}
	h.running.extend(extended, sentAt.Add(h.cfg.LeaseDuration))
	if len(res.Unextended) > 0 && ctx.Err() == nil {
		h.logger.Warn("spool: heartbeat failed on part of the store; those leases not extended", "jobs", len(res.Unextended), "of", len(leases), "error", res.Err)
	}
	if len(res.Lost) > 0 {
		return h.leasesLost(ctx, res.Lost, interval)
	}
	return nil
}

// untilLeasesEnd returns a context that ends when the latest known end of
// the leases has passed, or at floor if that is later: two intervals from
// the send, when the last beat went out an interval ago and landed. Leases
// untracked (a store that credits stalls) or already ended (a job whose
// outcome waits to be written may still hold its lease, as nobody rescued
// it yet) get that much. The end is read again when it comes, as another
// beat may have moved it meanwhile.
func (h *heartbeat) untilLeasesEnd(ctx context.Context, leases []backend.LeaseRef, floor time.Time) (context.Context, context.CancelFunc) {
	bctx, cancel := context.WithCancelCause(ctx)
	var (
		mu    sync.Mutex
		timer *time.Timer
		check func()
	)
	check = func() {
		end := h.running.heldUntilLatest(leases)
		if end.Before(floor) {
			end = floor
		}
		mu.Lock()
		defer mu.Unlock()
		if wait := time.Until(end); wait > 0 && bctx.Err() == nil {
			timer = time.AfterFunc(wait, check)
			return
		}
		cancel(errBeatTooLate)
	}
	check()
	return bctx, func() {
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}

// errBeatTooLate ends a heartbeat that had not landed when every lease it
// carried had ended.
var errBeatTooLate = errors.New("every lease it carried ended before it landed")

// slowNotes logs a recurring condition of the heartbeat at most once a
// minute, with how often it happened since the last line.
type slowNotes struct {
	mu     sync.Mutex
	last   time.Time
	missed int
}

func (s *slowNotes) note(logger *slog.Logger, msg string, args ...any) {
	s.mu.Lock()
	if !s.last.IsZero() && time.Since(s.last) < time.Minute {
		s.missed++
		s.mu.Unlock()
		return
	}
	s.last = time.Now()
	missed := s.missed
	s.missed = 0
	s.mu.Unlock()
	logger.Warn(msg, append(args, "times_since_last_said", missed)...)
}

// leaseEnded logs the handlers the running set cancelled because their
// lease ended with no heartbeat landed.
func (h *heartbeat) leaseEnded(jobs []runningJob) {
	ids := make([]int64, 0, min(len(jobs), maxLossLookups))
	for _, j := range jobs[:min(len(jobs), maxLossLookups)] {
		ids = append(ids, j.lease.ID)
	}
	byQueue := map[string]int{}
	for _, j := range jobs {
		byQueue[j.queue]++
	}
	for q, n := range byQueue {
		h.cfg.Observer.leasesLost(q, n)
	}
	h.logger.Warn("spool: job leases ended before a heartbeat could extend them; cancelling those jobs' handlers, as the jobs may be rescued and run again elsewhere",
		"jobs", len(jobs), "job_ids", ids, "cause", "no heartbeat reached the database within the lease (the database was unreachable or too slow, or this process was paused)")
}

// maxLossLookups bounds the rows read to explain lost leases after one beat.
const maxLossLookups = 20

// leasesLost cancels the handlers whose lease a heartbeat found lost, and
// returns explain, which logs why each was lost, read from the job's row.
// A lease ended by the commit of the handler's own CompleteTx is no news.
//
// Whether a lease in a CompleteTx transaction ended by that commit is
// read within timeout, before anything is cancelled. The causes are read
// afterwards, by explain, within a lease of their own: the handlers are
// cancelled by then, so a slow read only delays the warning, and a read
// cut off at the beat's interval on a loaded database would leave the
// warning without its cause.
func (h *heartbeat) leasesLost(ctx context.Context, lost []backend.LeaseRef, timeout time.Duration) (explain func()) {
	running, inTx := h.running.sortLost(lost)
	if len(running) == 0 && len(inTx) == 0 {
		return nil
	}
	rows := make(map[backend.LeaseRef]*backend.JobRow, len(running)+len(inTx))
	errs := make(map[backend.LeaseRef]error)
	lookups := 0
	lookup := func(ctx context.Context, l backend.LeaseRef) {
		if lookups >= maxLossLookups {
			return
		}
		lookups++
		row, err := h.be.JobGet(ctx, l.ID)
		if err != nil {
			errs[l] = err
			return
		}
		rows[l] = row
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var committed []backend.LeaseRef
	for _, l := range inTx {
		lookup(lctx, l)
		row, err := rows[l], errs[l]
		switch {
		case row != nil && row.Fence == l.Fence && row.State == backend.StateCompleted:
			committed = append(committed, l) // the CompleteTx transaction committed
			continue
		case errors.Is(err, backend.ErrNotFound) && h.cfg.DeleteCompleted:
			committed = append(committed, l) // committed, and the row deleted on completion
			continue
		case row == nil && !errors.Is(err, backend.ErrNotFound):
			// Not read (past the lookup bound, or the read failed, as
			// one outlasting its deadline on a loaded machine does):
			// assume the commit, as is usual. The lease stays in the
			// running set, so if it was not that, the next beat finds it
			// lost again and reads again.
			committed = append(committed, l)
			continue
		}
		running = append(running, l)
	}
	// A lease ended by the handler's own commit is not one whose end
	// should cancel the handler.
	h.running.settled(committed)
	running, byQueue := h.running.cancelRunning(running, ErrLeaseLost)
	for q, k := range byQueue {
		h.cfg.Observer.leasesLost(q, k)
	}
	n := len(running)
	if n == 0 {
		return nil
	}
	return func() {
		ectx, cancel := context.WithTimeout(ctx, h.cfg.LeaseDuration)
		defer cancel()
		causes := make([]string, 0, len(running))
		// A user's cancellation is what its caller asked for, not a fault
		// for an operator to look into: told at Info when it is every
		// cause.
		byUsers := true
		for _, l := range running {
			if _, ok := rows[l]; !ok && errs[l] == nil {
				lookup(ectx, l)
			}
			if row, err := rows[l], errs[l]; row != nil || err != nil {
				causes = append(causes, fmt.Sprintf("job %d: %s", l.ID, leaseLossCause(l, row, err)))
				byUsers = byUsers && err == nil && row.State == backend.StateCancelled
			}
		}
		if len(causes) < len(running) {
			causes = append(causes, fmt.Sprintf("%d more not looked up", len(running)-len(causes)))
			byUsers = false
		}
		if byUsers {
			ids := make([]int64, len(running))
			for i, l := range running {
				ids[i] = l.ID
			}
			h.logger.Info("spool: jobs cancelled by a user; cancelling their handlers", "jobs", n, "job_ids", ids)
			return
		}
		h.logger.Warn("spool: job leases no longer held; cancelling those jobs' handlers", "jobs", n, "causes", strings.Join(causes, "; "))
	}
}

// leaseLossCause says, from the job's row as it is now, why the lease l is
// no longer held.
func leaseLossCause(l backend.LeaseRef, row *backend.JobRow, err error) string {
	const missed = "this process's heartbeats did not reach the database within the lease (it was paused, starved or cut off from the database)"
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return "the job was deleted"
	case err != nil:
		return fmt.Sprintf("could not read the job to tell why (%v)", err)
	case row.State == backend.StateCancelled:
		return "cancelled by a user"
	case row.Fence > l.Fence && row.State == backend.StateRunning:
		return fmt.Sprintf("rescued after its lease ended and claimed again by %s: %s", row.LeasedBy, missed)
	case row.Fence > l.Fence:
		return fmt.Sprintf("rescued after its lease ended and claimed again since (now %s): %s", row.State, missed)
	case row.State == backend.StateRetryable || row.State == backend.StateAvailable || row.State == backend.StateDiscarded:
		return fmt.Sprintf("rescued after its lease ended (now %s): %s", row.State, missed)
	case row.State == backend.StateCompleted:
		return "already completed under this lease (by CompleteTx in a transaction that committed)"
	default:
		return fmt.Sprintf("the job is now %s under fence %d", row.State, row.Fence)
	}
}

// abandonOverrun records a retry for jobs whose handler is still running
// grace after its timeout: the handler ignores its context and Go cannot
// stop it. Its lease is extended until this retry is written; without the
// retry it would be extended for as long as the handler runs. The retry
// waits one lease, as rescue would have, so the new attempt is unlikely to
// overlap the stuck handler; the handler keeps its worker slot until it
// returns.
func (h *heartbeat) abandonOverrun(ctx context.Context, grace time.Duration) {
	jobs := h.running.overrun(time.Now(), grace)
	if len(jobs) == 0 {
		return
	}
	finishes := make([]backend.JobFinish, len(jobs))
	for i, j := range jobs {
		msg := fmt.Sprintf("job timed out after %s and its handler had not returned %s later (it ignores its context); retried after one lease", j.timeout, grace.Round(time.Millisecond))
		finishes[i] = backend.JobFinish{Lease: j.lease, Outcome: backend.OutcomeRetry, Delay: h.cfg.LeaseDuration,
			Error: &backend.AttemptError{Attempt: j.attempt, Error: msg}}
		h.logger.Warn("spool: a job's handler ignores its context: it is still running past its timeout; recorded a retry, the handler keeps its worker slot until it returns",
			"job_id", j.lease.ID, "kind", j.kind, "attempt", j.attempt, "timeout", j.timeout, "running_for", time.Since(j.started).Round(time.Millisecond))
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	res, err := h.be.JobFinishMany(wctx, &backend.JobFinishManyParams{Finishes: finishes})
	failed := leasesOf(finishes)
	if err == nil {
		failed, err = res.Unwritten, res.Err // part of the store failed
	}
	if len(failed) > 0 {
		h.running.unabandon(failed)
		if ctx.Err() == nil {
			h.logger.Warn("spool: could not record the retry of jobs whose handler overran its timeout; trying again at the next heartbeat", "jobs", len(failed), "error", err)
		}
	}
}
