package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// heartbeatLoop extends the leases of held jobs every third of the lease (or
// at once when asked), in one write, and cancels jobs whose lease is gone.
func (h *heartbeat) run(ctx context.Context) {
	interval := h.cfg.LeaseDuration / 3
	t := time.NewTicker(interval)
	defer t.Stop()
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
		// A beat may take until the leases it extends end: the last beat
		// went out an interval ago, so they have two intervals left. Cut
		// off at one interval, a store answering in 1.5 intervals failed
		// every beat, the leases ended while their handlers ran, and rescue
		// gave the jobs to a second run (TestSlowHeartbeatKeepsLease).
		hbCtx, cancel := context.WithTimeout(ctx, h.cfg.LeaseDuration-interval)
		res, err := h.be.JobHeartbeatMany(hbCtx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: h.cfg.LeaseDuration})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.logger.Warn("spool: heartbeat failed; leases not extended", "jobs", len(leases), "error", err)
			}
			continue
		}
		if len(res.Unextended) > 0 && ctx.Err() == nil {
			h.logger.Warn("spool: heartbeat failed on part of the store; those leases not extended", "jobs", len(res.Unextended), "of", len(leases), "error", res.Err)
		}
		if len(res.Lost) > 0 {
			h.leasesLost(ctx, res.Lost, interval)
		}
	}
}

// maxLossLookups bounds the rows read to explain lost leases after one beat.
const maxLossLookups = 20

// leasesLost cancels the handlers whose lease a heartbeat found lost and
// logs why each was lost, read from the job's row. A lease ended by the
// commit of the handler's own CompleteTx is no news.
func (h *heartbeat) leasesLost(ctx context.Context, lost []backend.LeaseRef, timeout time.Duration) {
	running, inTx := h.running.sortLost(lost)
	if len(running) == 0 && len(inTx) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rows := make(map[backend.LeaseRef]*backend.JobRow, len(running)+len(inTx))
	errs := make(map[backend.LeaseRef]error)
	lookups := 0
	lookup := func(l backend.LeaseRef) {
		if lookups >= maxLossLookups {
			return
		}
		lookups++
		row, err := h.be.JobGet(lctx, l.ID)
		if err != nil {
			errs[l] = err
			return
		}
		rows[l] = row
	}
	for _, l := range inTx {
		lookup(l)
		row, err := rows[l], errs[l]
		switch {
		case row != nil && row.Fence == l.Fence && row.State == backend.StateCompleted:
			continue // the CompleteTx transaction committed
		case errors.Is(err, backend.ErrNotFound) && h.cfg.DeleteCompleted:
			continue // committed, and the row deleted on completion
		case row == nil && !errors.Is(err, backend.ErrNotFound):
			// Not read (past the lookup bound, or the read failed, as
			// one outlasting its deadline on a loaded machine does):
			// assume the commit, as is usual. The lease stays in the
			// running set, so if it was not that, the next beat finds it
			// lost again and reads again.
			continue
		}
		running = append(running, l)
	}
	n, byQueue := h.running.cancelRunning(running, ErrLeaseLost)
	for q, k := range byQueue {
		h.cfg.Observer.leasesLost(q, k)
	}
	if n == 0 {
		return
	}
	causes := make([]string, 0, len(running))
	for _, l := range running {
		if _, ok := rows[l]; !ok && errs[l] == nil {
			lookup(l)
		}
		if row, err := rows[l], errs[l]; row != nil || err != nil {
			causes = append(causes, fmt.Sprintf("job %d: %s", l.ID, leaseLossCause(l, row, err)))
		}
	}
	if len(causes) < len(running) {
		causes = append(causes, fmt.Sprintf("%d more not looked up", len(running)-len(causes)))
	}
	h.logger.Warn("spool: job leases no longer held; cancelling those jobs' handlers", "jobs", n, "causes", strings.Join(causes, "; "))
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
