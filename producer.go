package spool

import (
	"context"
	"time"

	"github.com/spoolq/spool/backend"
)

// producer claims jobs of one queue in batches, keeps a local buffer of
// claimed jobs (prefetch), and starts each in its own goroutine while fewer
// than maxWorkers run. One goroutine (run) owns all of its state; the others
// talk to it through channels.
type producer struct {
	c          *Client
	queue      string
	maxWorkers int
	prefetch   int
	lowWater   int

	wakeCh chan struct{} // a wake-up: jobs may be waiting
	doneCh chan struct{} // a job finished: a slot is free
	stopCh chan struct{} // closed by stop
	exited chan struct{} // closed when run returns
}

type fetchResult struct {
	rows  []*backend.JobRow
	asked int
	err   error
}

type bufferedJob struct {
	row       *backend.JobRow
	claimedAt time.Time
}

func newProducer(c *Client, queue string, q QueueConfig) *producer {
	return &producer{
		c:          c,
		queue:      queue,
		maxWorkers: q.MaxWorkers,
		prefetch:   q.Prefetch,
		lowWater:   q.Prefetch / 2,
		wakeCh:     make(chan struct{}, 1),
		doneCh:     make(chan struct{}, q.MaxWorkers),
		stopCh:     make(chan struct{}),
		exited:     make(chan struct{}),
	}
}

func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

func (p *producer) stop() {
	select {
	case <-p.stopCh:
	default:
		close(p.stopCh)
	}
}

func (p *producer) run() {
	defer close(p.exited)
	cfg := &p.c.config
	var (
		buffer   []bufferedJob
		running  int
		fetching bool
		more     = true // the database may have jobs for us
		stopping bool
		failures int
		retryAt  time.Time
		fetchCh  = make(chan fetchResult, 1)
		stopCh   = p.stopCh
	)
	poll := time.NewTicker(cfg.PollInterval)
	defer poll.Stop()
	// A prefetched job waits at most half its lease; past that it goes back
	// rather than run on a lease about to end.
	maxWait := cfg.LeaseDuration / 2
	var retryTimer *time.Timer
	var retryC <-chan time.Time

	for {
		for running < p.maxWorkers && len(buffer) > 0 && !stopping {
			j := buffer[0]
			buffer[0] = bufferedJob{}
			buffer = buffer[1:]
			running++
			p.c.startJob(j.row, p.doneCh)
		}
		if stopping {
			p.release(buffer)
			buffer = nil
			if running == 0 && !fetching {
				return
			}
		} else if !fetching && more && len(buffer) <= p.lowWater && !time.Now().Before(retryAt) {
			if n := p.maxWorkers + p.prefetch - running - len(buffer); n > 0 {
				fetching = true
				go p.fetch(n, fetchCh)
			}
		}

		select {
		case <-stopCh:
			stopping, stopCh = true, nil
		case <-p.doneCh:
			running--
		case r := <-fetchCh:
			fetching = false
			if r.err != nil {
				failures++
				delay := jitter(min(time.Duration(1<<min(failures, 10))*50*time.Millisecond, 10*time.Second))
				retryAt = time.Now().Add(delay)
				if retryTimer == nil {
					retryTimer = time.NewTimer(delay)
				} else {
					retryTimer.Reset(delay)
				}
				retryC = retryTimer.C
				if !stopping {
					p.c.logger.Warn("spool: claim failed", "queue", p.queue, "error", r.err, "retry_in", delay)
				}
				continue
			}
			failures = 0
			more = len(r.rows) == r.asked
			now := time.Now()
			for _, row := range r.rows {
				buffer = append(buffer, bufferedJob{row: row, claimedAt: now})
			}
		case <-retryC:
			retryC = nil
			more = true
		case <-p.wakeCh:
			more = true
		case <-poll.C:
			more = true
			buffer = p.releaseStale(buffer, maxWait)
		}
	}
}

// fetch claims up to n jobs. A claim in flight when a stop begins completes;
// run then releases what it got.
func (p *producer) fetch(n int, out chan<- fetchResult) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := p.c.backend.JobClaim(ctx, &backend.JobClaimParams{
		Queue:    p.queue,
		Max:      n,
		Lease:    p.c.config.LeaseDuration,
		ClientID: p.c.config.ClientID,
	})
	out <- fetchResult{rows: rows, asked: n, err: err}
}

// releaseStale returns buffered jobs that waited longer than maxWait.
func (p *producer) releaseStale(buffer []bufferedJob, maxWait time.Duration) []bufferedJob {
	if len(buffer) == 0 {
		return buffer
	}
	cutoff := time.Now().Add(-maxWait)
	keep := buffer[:0]
	var stale []bufferedJob
	for _, j := range buffer {
		if j.claimedAt.Before(cutoff) {
			stale = append(stale, j)
		} else {
			keep = append(keep, j)
		}
	}
	p.release(stale)
	return keep
}

// release hands unstarted jobs back to the queue at once, their attempt given
// back.
func (p *producer) release(jobs []bufferedJob) {
	for _, j := range jobs {
		p.c.completer.add(backend.JobFinish{Lease: j.row.Lease(), Outcome: backend.OutcomeRelease}, j.row)
	}
}
