package engine

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/flow"
)

// producer claims jobs of one queue in batches, keeps a local buffer of
// claimed jobs (prefetch), and starts each in its own goroutine while fewer
// than maxWorkers run. One goroutine (run) owns its state, except the
// buffer and the count of running jobs, which it shares under mu with the
// job goroutines: one that finished a job takes the next from the buffer
// itself (next).
type producer struct {
	*producerEnv
	queue      string
	maxWorkers int
	prefetch   int
	lowWater   int
	// flow decides the claims of a flow-controlled queue (nil: plain
	// claims); only fetch, one at a time, uses it.
	flow *flow.Controller

	wakeCh chan struct{} // a wake-up: jobs may be waiting
	// named holds the jobs listed by wake-ups not yet read (wakeJobs),
	// and namedCh says it holds some.
	namedMu sync.Mutex
	named   []int64
	namedCh chan struct{}
	// fetchReqs hands a claim to a fetcher goroutine waiting for one
	// (unbuffered: a send succeeds only when one waits); see claim.
	fetchReqs chan fetchReq
	// freedCh says a job goroutine gave its slot back, or took the buffer
	// down to lowWater: run may start or claim more.
	freedCh chan struct{}

	// mu guards buffer, running and asked, and the ledger below.
	mu sync.Mutex
	// buffer holds the claimed jobs not yet started, in claim order.
	buffer []bufferedJob
	// bufferArray is the whole array buffer lives in (nil once buffer was
	// handed away): pop slices buffer from its front, so the next claim's
	// jobs go back to the front of the array rather than into a new one
	// (pushLocked).
	bufferArray []bufferedJob
	// running counts the queue's job goroutines: jobs started and not yet
	// finished, at most maxWorkers.
	running int
	// The ledger of what the producer may hold in the store that no other
	// part of the engine knows of, beside the buffer: the claims in flight
	// (by seq), the failed claims whose release is not yet confirmed
	// (their reply was lost: their jobs may be leased to this client
	// unseen), and the jobs taken out of the buffer to be handed back
	// whose release the outcome writer has not yet taken. A job leaves the
	// buffer for handingBack, and a claim id moves between claimsOut and
	// lost, under mu in one step, so that a stop that gives up on the
	// producer (leftBehind), exited or not, can name every job whose lease
	// only its end will free.
	claimsOut   map[uint64]fetchReq
	lost        []claimRef
	handingBack map[backend.LeaseRef]struct{}
	// abandoned is set when run, out of time, exits with claims in flight
	// (a stop gave up): from then on a claim's reply, when it comes, is
	// released by its fetcher (deliver) rather than handed to run, which
	// no longer reads them; its record stays in claimsOut until that
	// release is written.
	abandoned bool
	// releaseErr is why the last release of the lost claims, on exit,
	// failed (releaseClaims): a stop that had time reports it with the
	// claims left (unreleased).
	releaseErr error
	// asked counts the jobs the claims out may take: what each asked for
	// when sent, and what each took on when its turn came (grow). With
	// running and the buffer they never exceed maxWorkers plus prefetch;
	// a claim's part is given back when its reply's jobs join the buffer.
	asked int
	// maxWait is how long after its claim was sent a job may still start:
	// half its lease. Past that it goes back unstarted rather than run on a
	// lease about to end, or already ended and taken by rescue (a process
	// paused while its claim was in flight).
	maxWait time.Duration
	// groups are the jobs gathered for many-calls (many.go); only run
	// uses them. Each holds a slot, counted in running.
	groups gatherer
	// pausedCh says the queue was paused: the buffered jobs go back.
	pausedCh chan struct{}
	// checkingPause is set while a look at the stored pauses is in flight.
	checkingPause atomic.Bool
	stopCh        chan struct{} // closed by stop
	exited        chan struct{} // closed when run returns
	// claimsOver is closed once the producer is stopping and no claim is in
	// flight: from then on it claims nothing more.
	claimsOver     chan struct{}
	claimsOverOnce sync.Once

	// router, when set, routes wake-ups between processes (route.go);
	// relay is set by a routed wake-up to the hops its pass-on would carry.
	router *router
	relay  atomic.Int64

	// timerMu guards the due times this process knows of (wakeAt) and the
	// timer armed for the earliest of them.
	timerMu   sync.Mutex
	timer     *time.Timer
	timerWhen time.Time // when timer fires; zero when not armed
	due       dueTimes
	dueKeys   map[int64]struct{} // dueSlack buckets of the times in due
}

// producerEnv is what the producers of an engine share: the store, the
// config, and the stages a claimed job goes to next.
type producerEnv struct {
	be       backend.Backend
	cfg      *Config
	logger   *slog.Logger
	exec     *executor      // starts the jobs
	out      *outcomeWriter // takes the jobs handed back unstarted
	claimSeq atomic.Uint64  // numbers claim calls, for their ClaimIDs
	// gaveUp is closed when a stop gives up on handlers that ignore their
	// context: producers exit without waiting for them.
	gaveUp <-chan struct{}
	// waiting counts the producers with a worker idle, waiting for a
	// job (backend.WakeDemand).
	waiting atomic.Int64
}

// dueTimes is a min-heap of future wake-up times.
type dueTimes []time.Time

func (d dueTimes) Len() int           { return len(d) }
func (d dueTimes) Less(i, j int) bool { return d[i].Before(d[j]) }
func (d dueTimes) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }

// Push implements heap.Interface.
func (d *dueTimes) Push(x any) { *d = append(*d, x.(time.Time)) }

// Pop implements heap.Interface.
func (d *dueTimes) Pop() any {
	old := *d
	t := old[len(old)-1]
	*d = old[:len(old)-1]
	return t
}

const (
	// maxDueTimes bounds the wake-ups a producer remembers; past it, new
	// ones are dropped and those jobs are found by polling.
	maxDueTimes = 1024
	// dueSlack coalesces wake-ups in the same 5 ms bucket, and delays each a
	// little: due is decided by the database's clock.
	dueSlack = 5 * time.Millisecond
)

// dueKey is the coalescing bucket of a due time.
func dueKey(t time.Time) int64 { return t.UnixNano() / int64(dueSlack) }

type fetchResult struct {
	rows  []*backend.JobRow
	asked int
	// sentAt is when the claim was sent. The database started the leases
	// no earlier, so sentAt + LeaseDuration is a safe local estimate of
	// their end, however long the reply took to arrive (a pause, a slow
	// network, CPU starvation).
	sentAt time.Time
	// seq numbers the claim among the producer's claims, in the order
	// they were sent.
	seq uint64
	// claim is the claim sent (its max grown with it), for a reply that
	// comes once run has abandoned it (releaseLateReplies).
	claim claimRef
	err   error
	// unreleased are the claims still to release (failed claims whose jobs
	// may be leased to us unseen), including this fetch's if it failed.
	unreleased []claimRef
	// held: the queue's flow rules held back jobs that may be ready;
	// retryIn, when positive, is when a rate-held key may start again.
	held    bool
	retryIn time.Duration
	// more: a flow-controlled claim says jobs it may take remain.
	more bool
}

// claimRef is a claim sent to the store: its id, recorded as the lease
// holder of the jobs it took (JobRow.LeasedBy), and the most jobs it asked
// for.
type claimRef struct {
	id  string
	max int
}

type bufferedJob struct {
	row *backend.JobRow
	// claimedAt is when the claim that took the job was sent (not when its
	// reply arrived): the lease may have been running since then.
	claimedAt time.Time
	// replyAt is when the claim's reply arrived.
	replyAt time.Time
}

func newProducer(env *producerEnv, queue string, q Queue) *producer {
	var ctl *flow.Controller
	if q.Flow != nil {
		ctl = flow.NewController(*q.Flow)
	}
	return &producer{
		flow:        ctl,
		producerEnv: env,
		queue:       queue,
		maxWorkers:  q.MaxWorkers,
		prefetch:    q.Prefetch,
		lowWater:    q.Prefetch / 2,
		wakeCh:      make(chan struct{}, 1),
		namedCh:     make(chan struct{}, 1),
		fetchReqs:   make(chan fetchReq),
		pausedCh:    make(chan struct{}, 1),
		freedCh:     make(chan struct{}, 1),
		maxWait:     env.cfg.LeaseDuration / 2,
		stopCh:      make(chan struct{}),
		exited:      make(chan struct{}),
		claimsOver:  make(chan struct{}),
		claimsOut:   map[uint64]fetchReq{},
		handingBack: map[backend.LeaseRef]struct{}{},
	}
}

// ClaimLeft is a claim whose jobs a stop that gave up left behind without
// knowing which they are (see GaveUpError.Claims).
type ClaimLeft struct {
	Queue    string
	ID       string // recorded as the lease holder of its jobs (JobRow.LeasedBy)
	Max      int    // the most jobs it may hold
	InFlight bool   // its reply had not come; otherwise its reply was lost earlier and its release not confirmed
}

// leftBehind returns what the producer may still hold in the store that
// no write of the stop accounts for: the ids of the jobs claimed and not
// handed back (buffered, or whose release the outcome writer never took),
// and the claims whose jobs it does not know. Called by a stop that gave
// up, whether the producer exited or not: each job and claim is in one
// place of the ledger at any moment (see claimsOut).
func (p *producer) leftBehind() (jobs []int64, claims []ClaimLeft) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range p.buffer {
		jobs = append(jobs, j.row.ID)
	}
	for l := range p.handingBack {
		jobs = append(jobs, l.ID)
	}
	for _, r := range p.claimsOut {
		claims = append(claims, ClaimLeft{Queue: p.queue, ID: r.claim.id, Max: r.claim.max, InFlight: true})
		for _, c := range r.lostClaims {
			claims = append(claims, ClaimLeft{Queue: p.queue, ID: c.id, Max: c.max})
		}
	}
	for _, c := range p.lost {
		claims = append(claims, ClaimLeft{Queue: p.queue, ID: c.id, Max: c.max})
	}
	return jobs, claims
}

// unreleased returns the lost claims the producer's last release, on exit,
// could not write, and its error (nil: none are left).
func (p *producer) unreleased() ([]ClaimLeft, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lost) == 0 {
		return nil, nil
	}
	claims := make([]ClaimLeft, 0, len(p.lost))
	for _, c := range p.lost {
		claims = append(claims, ClaimLeft{Queue: p.queue, ID: c.id, Max: c.max})
	}
	return claims, p.releaseErr
}

// toHandBackLocked records that jobs, just taken out of the buffer (or
// out of run's hands), are to be handed back unstarted. mu is held.
func (p *producer) toHandBackLocked(jobs ...bufferedJob) {
	for _, j := range jobs {
		p.handingBack[j.row.Lease()] = struct{}{}
	}
}

// endClaims closes claimsOver once.
func (p *producer) endClaims() { p.claimsOverOnce.Do(func() { close(p.claimsOver) }) }

// paused tells the producer its queue was paused.
func (p *producer) paused() {
	select {
	case p.pausedCh <- struct{}{}:
	default:
	}
}

// checkPaused looks, off the producer's goroutine and one look at a time,
// whether the queue was paused by another process, and tells the producer
// if so. Claims already stop at a pause's commit; this returns the jobs
// claimed before it that still wait in the buffer.
func (p *producer) checkPaused() {
	if !p.checkingPause.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.checkingPause.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.PollInterval)
		defer cancel()
		qs, err := p.be.QueuePausedAll(ctx)
		if err != nil {
			return // the next poll looks again
		}
		for _, q := range qs {
			if q.Queue == p.queue {
				p.paused()
				return
			}
		}
	}()
}

// wakeRouted is a wake-up routed to this process (route.go), passed on
// hops times so far, listing jobs (nil: not listed).
func (p *producer) wakeRouted(hops int, jobs []int64) {
	p.relay.Store(int64(hops) + 1)
	p.wakeJobs(jobs)
}

// maxNamed bounds the listed jobs a producer keeps unread or awaiting:
// past it, they are forgotten and the wake-ups count as unlisted ones.
const maxNamed = 4096

// wakeJobs is a wake-up that lists every job it announces (nil: not
// listed, a plain wake-up). run claims for it only if some of them were
// not taken by its own claims (takenIDs); with claims out, it waits for
// their replies to decide.
func (p *producer) wakeJobs(jobs []int64) {
	if jobs == nil {
		p.wake()
		return
	}
	p.namedMu.Lock()
	if len(p.named)+len(jobs) > maxNamed {
		p.named = p.named[:0]
		p.namedMu.Unlock()
		p.wake()
		return
	}
	p.named = append(p.named, jobs...)
	p.namedMu.Unlock()
	select {
	case p.namedCh <- struct{}{}:
	default:
	}
}

// takeNamed appends the listed jobs of the wake-ups not yet read to buf
// and forgets them.
func (p *producer) takeNamed(buf []int64) []int64 {
	p.namedMu.Lock()
	buf = append(buf, p.named...)
	p.named = p.named[:0]
	p.namedMu.Unlock()
	return buf
}

// takenIDs holds the ids of the jobs this producer's last takenClaims
// claims took, for the wake-ups that list jobs: a wake-up can arrive
// after the claim that took its jobs (the claim, sent for another
// wake-up, read them committed), and claiming for it finds nothing.
type takenIDs struct {
	claims [takenClaims][]int64
	next   int
}

// takenClaims is how many claims' jobs takenIDs remembers. A wake-up
// arrives within a few claims of the commit it announces; one whose jobs
// are forgotten is claimed for, as before, which costs a claim at most.
const takenClaims = 8

// add records the jobs of a claim.
func (t *takenIDs) add(rows []*backend.JobRow) {
	ids := t.claims[t.next][:0]
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	t.claims[t.next] = ids
	t.next = (t.next + 1) % takenClaims
}

// has reports whether id was taken by one of the claims remembered.
func (t *takenIDs) has(id int64) bool {
	for _, ids := range t.claims {
		if slices.Contains(ids, id) {
			return true
		}
	}
	return false
}

// drop removes from ids, in place and in order, those the claims
// remembered took. Past a few ids it looks them up in a set, in one pass
// over the claims' jobs: wake-ups awaiting replies can list thousands of
// jobs (maxNamed) and a backlog's claims take thousands, so a scan of
// every claim for each id would cost their product on the producer's loop.
func (t *takenIDs) drop(ids []int64) []int64 {
	if len(ids) <= 8 {
		return slices.DeleteFunc(ids, t.has)
	}
	held := make(map[int64]bool, len(ids))
	for _, id := range ids {
		held[id] = false
	}
	for _, c := range t.claims {
		for _, id := range c {
			if _, ok := held[id]; ok {
				held[id] = true
			}
		}
	}
	return slices.DeleteFunc(ids, func(id int64) bool { return held[id] })
}

func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// wakeAt asks for a wake-up at t, when a job this process scheduled (a
// delayed insert, a retry, a snooze) becomes due, instead of waiting for the
// next poll.
func (p *producer) wakeAt(t time.Time) {
	t = t.Add(dueSlack)
	p.timerMu.Lock()
	defer p.timerMu.Unlock()
	if !t.After(time.Now()) {
		p.wake()
		return
	}
	key := dueKey(t)
	if _, ok := p.dueKeys[key]; ok || len(p.due) >= maxDueTimes {
		return // coalesced with one already kept, or full (polling finds it)
	}
	if p.dueKeys == nil {
		p.dueKeys = map[int64]struct{}{}
	}
	p.dueKeys[key] = struct{}{}
	heap.Push(&p.due, t)
	p.armTimer()
}

// armTimer points the timer at the earliest due time. timerMu is held.
func (p *producer) armTimer() {
	if len(p.due) == 0 {
		return
	}
	next := p.due[0]
	if !p.timerWhen.IsZero() && !next.Before(p.timerWhen) {
		return // armed for that time or an earlier one
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(time.Until(next), p.fireDue)
	} else {
		p.timer.Reset(time.Until(next))
	}
	p.timerWhen = next
}

// fireDue wakes the producer for every due time that has come and re-arms
// the timer for the next.
func (p *producer) fireDue() {
	p.timerMu.Lock()
	defer p.timerMu.Unlock()
	now := time.Now()
	fired := false
	for len(p.due) > 0 && !p.due[0].After(now) {
		delete(p.dueKeys, dueKey(heap.Pop(&p.due).(time.Time)))
		fired = true
	}
	p.timerWhen = time.Time{}
	p.armTimer()
	if fired {
		p.wake()
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
	defer p.endClaims()
	defer func() {
		p.timerMu.Lock()
		if p.timer != nil {
			p.timer.Stop()
		}
		p.timerMu.Unlock()
	}()
	cfg := p.cfg
	var (
		// inflight counts the claims out, at most maxClaimsOut (the
		// jobs they may take are p.asked).
		inflight int
		more     = true // the database may have jobs for us
		// wokeWhileFetching records a wake-up (or poll) that arrived
		// after the last claim was sent, while claims were out: another
		// claim may go out at once (mayClaim).
		wokeWhileFetching bool
		// sent counts the claims sent. A short reply clears more only if
		// its claim was sent after moreSince: the count of claims sent
		// when the last sign of waiting jobs came (a wake-up or poll while
		// claims were out, a full reply, a failed claim's retry, a late
		// release). With claims out at once, replies arrive in any order:
		// an older claim's short reply, whose snapshot may predate the
		// sign, must not clear more that a newer one's set. A queue with
		// one idle worker and a claim out from before a resume took one
		// job through a second claim (full), then the first claim's empty
		// reply cleared more, and the other jobs waited for the poll.
		sent, moreSince uint64
		stopping        bool
		gaveUp          bool // the stop gave up waiting for handlers
		gaveUpCh        = p.gaveUp
		failures        int
		retryAt         time.Time
		fetchCh         = make(chan fetchResult, maxClaimsOut)
		stopCh          = p.stopCh
		// relay, when above 0, is the hops of the pass-on due if the next
		// claim comes back full: a routed wake-up made it, and more jobs
		// than it took may wait for the other processes.
		relay int
		// taken are the jobs of the last claims; awaiting the jobs listed
		// by wake-ups that came while claims were out and that no reply
		// has held yet: once every claim out has replied, a claim goes
		// out for those left. named is takeNamed's buffer.
		taken    takenIDs
		awaiting []int64
		named    []int64
	)
	poll := time.NewTicker(cfg.PollInterval)
	defer poll.Stop()
	// waits is whether this producer counts in waiting.
	waits := false
	defer func() {
		if waits {
			p.waiting.Add(-1)
		}
	}()
	var starts, late, gathers []bufferedJob
	var gatherRules []*ManyRules
	// flushTimer starts the calls of many-call groups that did not fill
	// within their MaxWait.
	flushTimer := time.NewTimer(time.Hour)
	flushTimer.Stop()
	defer flushTimer.Stop()
	var retryTimer *time.Timer
	var retryC <-chan time.Time
	// heldTimer looks again at a queue whose flow rules held jobs back.
	heldTimer := time.NewTimer(time.Hour)
	heldTimer.Stop()
	defer heldTimer.Stop()

	for {
		// A stop wins over every other event: once stop has returned, no
		// new claim starts, whatever else select would have picked first.
		select {
		case <-stopCh:
			stopping, stopCh = true, nil
		default:
		}
		if stopping && p.groups.jobs > 0 {
			p.releaseGathered()
		}
		p.mu.Lock()
		if p.running < p.maxWorkers && len(p.buffer) > 0 && !stopping {
			now := time.Now()
			for p.running < p.maxWorkers && len(p.buffer) > 0 {
				j := p.pop()
				if !p.startable(j, now) {
					late = append(late, j)
					p.toHandBackLocked(j)
					continue
				}
				p.running++
				if rules := p.manyRules(j.row); rules != nil {
					gathers, gatherRules = append(gathers, j), append(gatherRules, rules)
					continue
				}
				starts = append(starts, j)
			}
			full := p.running >= p.maxWorkers
			p.mu.Unlock()
			for _, j := range starts {
				p.exec.start(j, p)
			}
			clear(starts)
			starts = starts[:0]
			if len(gathers) > 0 || p.groups.jobs > 0 {
				for i, j := range gathers {
					p.gather(j, gatherRules[i], now)
				}
				clear(gathers)
				clear(gatherRules)
				gathers, gatherRules = gathers[:0], gatherRules[:0]
				// With no slot free, no job can join a group: waiting
				// for one would only delay the calls.
				if next := p.flushGroups(time.Now(), full); !next.IsZero() {
					flushTimer.Reset(time.Until(next))
				}
			}
			if len(late) > 0 {
				p.releaseLate(late)
				clear(late)
				late, more, moreSince = late[:0], true, sent
			}
			p.mu.Lock()
		}
		buffered, running, lost := len(p.buffer), p.running, len(p.lost)
		var unstarted []bufferedJob
		if stopping {
			unstarted, p.buffer, p.bufferArray = p.buffer, nil, nil
			p.toHandBackLocked(unstarted...)
		}
		p.mu.Unlock()
		if stopping {
			if inflight == 0 {
				p.endClaims()
			}
			p.release(unstarted)
			if gaveUp {
				// The stop is out of time: no waiting for stuck handlers, a
				// claim in flight or the release of lost claims. The stop
				// names them from the ledger (leftBehind). A claim in
				// flight is released when its reply comes, by its fetcher
				// (deliver): from now on no one reads fetchCh, so the
				// replies already in it are released here, off this
				// goroutine. Lost claims and what a late release fails to
				// write are rescued when their leases end.
				p.mu.Lock()
				p.abandoned = true
				var replies []fetchResult
				for drained := false; !drained; {
					select {
					case r := <-fetchCh:
						replies = append(replies, r)
					default:
						drained = true
					}
				}
				p.mu.Unlock()
				if len(replies) > 0 {
					go p.releaseLateReplies(replies)
				}
				if inflight > 0 || lost > 0 {
					p.logger.Warn("spool: stop gave up with claims unreleased; claims in flight are released when their replies come, the others' jobs are rescued when their leases end",
						"queue", p.queue, "claims_in_flight", inflight, "unreleased_claims", lost)
				}
				return
			}
			if running == 0 && inflight == 0 {
				p.releaseClaims()
				return
			}
		} else if more && buffered <= p.lowWater && !time.Now().Before(retryAt) && p.mayClaim(inflight, wokeWhileFetching, lost) {
			// The ask is reserved as it is decided: a claim out may take
			// on the room left meanwhile (grow).
			p.mu.Lock()
			n := p.maxWorkers + p.prefetch - running - buffered - p.asked
			if n > 0 {
				switch {
				case inflight == 0 && p.flow == nil && n > 2*secondClaimReserve && running+buffered < p.maxWorkers:
					n -= min((maxClaimsOut-1)*secondClaimReserve, n/2)
				case inflight > 0 && inflight < maxClaimsOut-1:
					n = min(n, secondClaimReserve)
				}
				p.asked += n
			}
			p.mu.Unlock()
			if n > 0 {
				// The part for free workers; the rest is prefetch, which a
				// flow-controlled claim treats apart.
				forWorkers := max(0, p.maxWorkers-running-buffered)
				// A wake-up still waiting to be read was sent before this
				// claim: what caused it (a commit, a due time) precedes
				// the claim's snapshot, which covers it. Read as one
				// that arrived while the claim was out, it would send a
				// second claim for nothing: every process's start did,
				// since its subscription wakes it just before its first
				// claim, and each such claim cost a connection of its own
				// and that connection's plan of the claim.
				select {
				case <-p.wakeCh:
					if hops := int(p.relay.Swap(0)); hops > 0 && p.router != nil {
						relay = hops // room to claim: pass on if this one comes back full
					}
				default:
				}
				// So does a wake-up that listed its jobs, read or not.
				select {
				case <-p.namedCh:
					named = p.takeNamed(named[:0])
					if hops := int(p.relay.Swap(0)); hops > 0 && p.router != nil {
						relay = hops
					}
				default:
				}
				awaiting = awaiting[:0]
				inflight, wokeWhileFetching = inflight+1, false
				sent++
				r := fetchReq{n: n, forWorkers: forWorkers, seq: sent, out: fetchCh,
					claim: claimRef{id: fmt.Sprintf("%s#%d", p.cfg.ClientID, p.claimSeq.Add(1)), max: n}}
				p.mu.Lock()
				// The fetch releases the lost claims, or hands them back.
				r.lostClaims, p.lost = p.lost, nil
				p.claimsOut[sent] = r
				p.mu.Unlock()
				p.claim(r)
			}
		}

		// An idle worker would start a job inserted now only if a
		// wake-up (or the poll) brought it; a queue whose workers are all
		// busy starts none before one finishes, and keeps a wake-up that
		// came meanwhile (more) for the claim after.
		// Claims out do not count: sampled while one is out (most of the
		// time at a job a millisecond), the queue would look busy.
		if w := !stopping && running+buffered < p.maxWorkers; w != waits {
			waits = w
			if w {
				p.waiting.Add(1)
			} else {
				p.waiting.Add(-1)
			}
		}
		select {
		case <-stopCh:
			stopping, stopCh = true, nil
		case <-gaveUpCh:
			stopping, gaveUp = true, true
		case <-p.freedCh:
		case r := <-fetchCh:
			inflight--
			select {
			case <-p.gaveUp:
				// The stop gave up before this reply was read: it may
				// already have named the claim, and the outcome writer
				// may be closed to the releases of its jobs. Released by
				// the claim's id, as the replies run will not read.
				stopping, gaveUp = true, true
				go p.releaseLateReplies([]fetchResult{r})
				continue
			default:
			}
			p.mu.Lock()
			delete(p.claimsOut, r.seq)
			p.lost = append(p.lost, r.unreleased...)
			p.mu.Unlock()
			if r.err != nil {
				p.mu.Lock()
				p.asked -= r.asked
				p.mu.Unlock()
				failures++
				delay := jitter(min(time.Duration(1<<min(failures, 10))*50*time.Millisecond, maxRetryBackoff))
				retryAt = time.Now().Add(delay)
				if retryTimer == nil {
					retryTimer = time.NewTimer(delay)
				} else {
					retryTimer.Reset(delay)
				}
				retryC = retryTimer.C
				if !stopping {
					p.logger.Warn("spool: claim failed", "queue", p.queue, "error", r.err, "retry_in", delay)
				}
				continue
			}
			failures = 0
			taken.add(r.rows)
			if len(awaiting) > 0 {
				awaiting = taken.drop(awaiting)
			}
			if relay > 0 {
				if len(r.rows) == r.asked {
					p.router.passOn(p.queue, relay)
				}
				relay = 0
			}
			switch {
			case len(r.rows) == r.asked || r.more:
				more, moreSince = true, sent
			case r.seq > moreSince:
				// Sent after every sign of waiting jobs, a wake-up
				// during this claim's flight included: its snapshot
				// covers them all.
				more = false
			}
			if r.held && len(r.rows) < r.asked {
				wait := cfg.FlowPollInterval
				if r.retryIn > 0 {
					wait = min(wait, r.retryIn+dueSlack)
				}
				heldTimer.Reset(wait)
			}
			if inflight == 0 && len(awaiting) > 0 {
				// Jobs listed by wake-ups that came while claims were
				// out, and none of those claims took them: committed
				// after their snapshots, they wait for the next claim.
				more, moreSince = true, sent
				awaiting = awaiting[:0]
			}
			replyAt := time.Now()
			p.mu.Lock()
			p.asked -= r.asked
			p.pushLocked(r.rows, r.sentAt, replyAt)
			p.mu.Unlock()
		case <-retryC:
			retryC = nil
			more, moreSince = true, sent
		case <-heldTimer.C:
			more, wokeWhileFetching, moreSince = true, inflight > 0, sent
		case <-p.wakeCh:
			more, wokeWhileFetching, moreSince = true, inflight > 0, sent
			relay = p.routed(relay, buffered, running)
		case <-p.namedCh:
			named = p.takeNamed(named[:0])
			named = taken.drop(named)
			if len(named) == 0 {
				// Every job listed was taken by this producer's own
				// claims: nothing to claim, nothing to pass on.
				p.relay.Store(0)
				continue
			}
			if inflight == 0 {
				more, moreSince = true, sent
			} else if len(awaiting)+len(named) <= maxNamed {
				// The claims out may hold these jobs: their replies
				// decide (see fetchCh). They take turns with a claim
				// sent now under the queue's claim lock anyway.
				awaiting = append(awaiting, named...)
			} else {
				more, wokeWhileFetching, moreSince = true, true, sent
				awaiting = awaiting[:0]
			}
			relay = p.routed(relay, buffered, running)
		case <-poll.C:
			more, wokeWhileFetching, moreSince = true, inflight > 0, sent
			// Jobs held unstarted (buffered or gathered) go back if the
			// queue was paused elsewhere.
			if p.releaseStale() || p.groups.jobs > 0 {
				p.checkPaused()
			}
		case <-flushTimer.C:
			if next := p.flushGroups(time.Now(), false); !next.IsZero() {
				flushTimer.Reset(time.Until(next))
			}
		case <-p.pausedCh:
			p.releaseGathered()
			p.mu.Lock()
			buffer := p.buffer
			p.buffer, p.bufferArray = nil, nil
			p.toHandBackLocked(buffer...)
			p.mu.Unlock()
			if len(buffer) > 0 {
				p.logger.Info("spool: queue paused; prefetched jobs handed back unstarted", "queue", p.queue, "jobs", len(buffer))
				p.release(buffer)
			}
		}
	}
}

// routed handles the relay of a routed wake-up just read, if any, and
// returns the relay of the next claim: a process with no room to claim
// passes the wake-up on, once; one with room passes it on if its claim
// comes back full.
func (p *producer) routed(relay, buffered, running int) int {
	hops := int(p.relay.Swap(0))
	if hops <= 0 || p.router == nil {
		return relay
	}
	// Room asked for by claims in flight counts as room: the claim after
	// them (wokeWhileFetching) answers this wake-up. Counted as taken,
	// every wake-up that came while a claim was out was passed on, and the
	// process it went to claimed for nothing.
	if buffered > p.lowWater || p.maxWorkers+p.prefetch-running-buffered <= 0 {
		// No room to claim: another process may have some. Passed on once
		// only, since every process may be as busy.
		if hops == 1 {
			p.router.passOn(p.queue, hops)
		}
		return relay
	}
	return hops
}

// secondClaimReserve is what each claim after the first may ask for while
// claims are out. A claim sent while none is out leaves maxClaimsOut-1
// reserves of the queue's capacity (workers plus prefetch) unasked, at
// most half of it, when some worker is idle and the capacity is more than
// twice one reserve. A wake-up that arrives while claims are out then
// sends another claim, for one reserve (the last one for the rest), at
// once, instead of waiting for a reply: under a write load a claim's reply
// waits for its commit's WAL flush and for the flush under way before it,
// and the slowest pickups were those that waited for it (BENCHMARKS.md, "A
// second claim while one is out", and "Up to four claims out while workers
// are idle"). The asks never exceed the capacity together, so the bound on
// claimed but unfinished jobs holds. A queue whose workers are all busy (a
// drain) and a small queue ask for all they can hold; a flow-controlled
// queue keeps one claim at a time, since its controller decides each claim
// from the outcome of the one before.
const secondClaimReserve = 16

// maxClaimsOut bounds the claims of a plain queue out at once.
const maxClaimsOut = 4

// mayClaim reports whether a claim may be sent with inflight claims out:
// always when none is; another one only for a plain queue, below
// maxClaimsOut, for a wake-up or poll that arrived after the last was
// sent, and with no lost claim left to release first.
func (p *producer) mayClaim(inflight int, wokeWhileFetching bool, lostClaims int) bool {
	return inflight == 0 || inflight < maxClaimsOut && p.flow == nil && wokeWhileFetching && lostClaims == 0
}

// fetchReq is a claim for fetch to send.
type fetchReq struct {
	n, forWorkers int
	claim         claimRef   // the claim's id and n
	lostClaims    []claimRef // released first
	seq           uint64     // the claim's place in the order claims were sent
	out           chan<- fetchResult
}

// claim sends r's claim from a goroutine of its own: an idle fetcher's,
// or a new one's. A fetcher waits for the next claim once its reply is
// handed over, until the producer exits, so a steady queue sends its claims
// from the same few goroutines, whose stacks have grown to what a claim
// needs, instead of growing a new goroutine's stack through the driver's
// calls for every claim. A new fetcher starts only while none waits: every
// other one has a claim out (at most maxClaimsOut) or has just handed its
// reply over, so there are never more than twice maxClaimsOut.
func (p *producer) claim(r fetchReq) {
	select {
	case p.fetchReqs <- r:
	default:
		go p.fetcher(r)
	}
}

// fetcher sends r's claim, then each claim handed to it, until the
// producer exits.
func (p *producer) fetcher(r fetchReq) {
	for {
		p.fetch(r)
		select {
		case r = <-p.fetchReqs:
		case <-p.exited:
			return
		}
	}
}

// fetch claims up to n jobs. A claim in flight when a stop begins completes;
// run then releases what it got. Each claim has its own id, recorded as the
// lease holder: if the claim fails, its jobs may still have been claimed (the
// reply was lost, not the commit), so the id is kept and released before the
// next claim rather than leaving those jobs to wait out their lease.
func (p *producer) fetch(r fetchReq) {
	n, forWorkers, lostClaims, seq := r.n, r.forWorkers, r.lostClaims, r.seq
	out := r.out
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unreleased, err := p.releaseClaimsCtx(ctx, lostClaims)
	if err != nil {
		// The claim was not sent: only the lost claims are left.
		p.deliver(out, fetchResult{asked: n, seq: seq, err: fmt.Errorf("release the jobs of an earlier claim whose reply was lost: %w", err), unreleased: unreleased})
		return
	}
	claimID := r.claim.id
	sentAt := time.Now()
	if p.flow != nil {
		res, err := p.claimFlow(ctx, forWorkers, n-forWorkers, claimID)
		if err != nil {
			unreleased = []claimRef{r.claim}
		}
		p.cfg.Observer.claimed(p.queue, len(res.Jobs), time.Since(sentAt), err)
		p.deliver(out, fetchResult{rows: res.Jobs, asked: n, sentAt: sentAt, seq: seq, claim: r.claim, err: err, unreleased: unreleased, held: res.Held, retryIn: res.RetryIn, more: res.More})
		return
	}
	grown := 0
	rows, err := p.be.JobClaim(ctx, &backend.JobClaimParams{
		Queue:   p.queue,
		Max:     n,
		Lease:   p.cfg.LeaseDuration,
		ClaimID: claimID,
		More: func() int {
			if grown == 0 {
				grown = p.grow(seq)
			}
			return grown
		},
	})
	r.claim.max += grown
	if err != nil {
		unreleased = []claimRef{r.claim}
	}
	p.cfg.Observer.claimed(p.queue, len(rows), time.Since(sentAt), err)
	p.deliver(out, fetchResult{rows: rows, asked: n + grown, sentAt: sentAt, seq: seq, claim: r.claim, err: err, unreleased: unreleased})
}

// deliver hands a claim's reply to run, or, once run has abandoned the
// claims in flight (a stop gave up on them), releases what the claim took
// itself: the stop named the claim as in flight (its jobs unknown), and
// the reply now says which they are, so they need not wait out their
// leases. The send is made under mu, so that run, abandoning under mu,
// finds every reply sent before in fetchCh; it never blocks there, since
// fetchCh holds a reply for every claim out (maxClaimsOut).
func (p *producer) deliver(out chan<- fetchResult, r fetchResult) {
	p.mu.Lock()
	if !p.abandoned {
		out <- r
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.releaseLateReplies([]fetchResult{r})
}

// lateReleaseTimeout bounds the release of a claim whose reply came after
// the stop gave up: it runs on the fetcher's goroutine (or one of its own),
// which exits once it returns.
const lateReleaseTimeout = 5 * time.Second

// releaseLateReplies releases the jobs of claims whose replies came after
// the stop gave up, by their claim ids (a fenced release by the jobs'
// leases would need the outcome writer, closed by then), with the lost
// claims each reply still carried. The claim's record stays in the ledger
// until the release returns; what the release could not write moves to the
// lost claims, and comes back by rescue when the leases end.
func (p *producer) releaseLateReplies(replies []fetchResult) {
	ctx, cancel := context.WithTimeout(context.Background(), lateReleaseTimeout)
	defer cancel()
	for _, r := range replies {
		claims := r.unreleased
		if r.err == nil {
			claims = append(slices.Clip(claims), r.claim)
		}
		var (
			left []claimRef
			err  error
		)
		for i, c := range claims {
			n, e := p.be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: c.id})
			if e != nil {
				left, err = claims[i:], e
				break
			}
			if n > 0 {
				p.logger.Info("spool: released the jobs of a claim whose reply came after the stop gave up", "queue", p.queue, "claim", c.id, "jobs", n)
			}
		}
		if err != nil {
			p.logger.Warn("spool: could not release the jobs of a claim whose reply came after the stop gave up; rescue returns them when their leases end",
				"queue", p.queue, "claims", len(left), "error", err)
		}
		p.mu.Lock()
		delete(p.claimsOut, r.seq)
		p.lost = append(p.lost, left...)
		p.mu.Unlock()
	}
}

// grow reserves for a claim whose turn has come the room its queue has
// now beyond what the claims out asked for: the jobs its workers finished
// while the claim waited. Where a store makes a queue's claims wait their
// turn (MariaDB's claim lock), a claim sized only when it was sent leaves
// that room to the next claim: with several processes draining a backlog,
// each waiting for the others' claims, more and smaller claims, each a
// transaction with its own durable commit and its own read of the
// queue's head. The bound holds: running, buffered and asked jobs never
// exceed maxWorkers plus prefetch. The ledger's record of the claim (seq)
// grows with it, so that a stop that gives up on it names what it may hold.
func (p *producer) grow(seq uint64) int {
	select {
	case <-p.stopCh:
		return 0 // stopping: what the claim takes goes back unstarted
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := max(0, p.maxWorkers+p.prefetch-p.running-len(p.buffer)-p.asked)
	p.asked += n
	if r, ok := p.claimsOut[seq]; ok {
		r.claim.max += n
		p.claimsOut[seq] = r
	}
	return n
}

// claimFlow claims up to n jobs of a flow-controlled queue: the controller
// decides inside the store's flow transaction, and keeps its new rotation
// state only once that transaction has committed.
func (p *producer) claimFlow(ctx context.Context, want, extra int, claimID string) (flow.Result, error) {
	var (
		res    flow.Result
		commit func()
	)
	params := &backend.JobClaimFlowParams{Queue: p.queue, Lease: p.cfg.LeaseDuration, ClaimID: claimID}
	if after, limit, ok := p.flow.KeysHint(want, extra); ok {
		params.KeysAfter, params.KeysLimit = after, limit
	}
	params.Quick = p.flow.Quick(want, extra)
	params.CountAll = p.flow.CountAll()
	err := p.be.JobClaimFlow(ctx, params,
		func(tx backend.FlowTx) (err error) {
			res, commit, err = p.flow.Claim(ctx, tx, want, extra)
			return err
		})
	if err != nil {
		return flow.Result{}, err
	}
	commit()
	if res.Declined {
		// The controller no longer offers a quick claim: this one goes
		// key by key.
		return p.claimFlow(ctx, want, extra, claimID)
	}
	return res, nil
}

// releaseClaimsCtx releases the jobs of failed claims and returns those it
// could not release, with the error that stopped it.
func (p *producer) releaseClaimsCtx(ctx context.Context, claims []claimRef) ([]claimRef, error) {
	for i, c := range claims {
		n, err := p.be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: c.id})
		if err != nil {
			return claims[i:], err
		}
		if n > 0 {
			p.logger.Info("spool: released the jobs of a claim whose reply was lost", "queue", p.queue, "claim", c.id, "jobs", n)
		}
	}
	return nil, nil
}

// releaseClaims is the last try at releasing failed claims (the ledger's
// lost ones), on exit; what it cannot release comes back by rescue when
// the leases end, and stays in the ledger for a stop that gives up to name.
//
// It tries again until its 5 s are over: a release by claim id may be
// written twice, and the first try often meets what failed the claim. A
// claim cut off by the server closing its sessions (a kill, a failover,
// an idle timeout) leaves the pool's idle connections closed too, and the
// pool learns it only from the statement sent on each: one try failed a
// stop that had all the time it needed (TestStopReleasesClaimCutByKill).
func (p *producer) releaseClaims() {
	p.mu.Lock()
	lost := slices.Clone(p.lost)
	p.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	left, err := p.releaseClaimsCtx(ctx, lost)
	for err != nil && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(releaseRetryPause):
			left, err = p.releaseClaimsCtx(ctx, left)
		}
	}
	p.mu.Lock()
	p.lost, p.releaseErr = left, err
	p.mu.Unlock()
	if err != nil {
		p.logger.Warn("spool: could not release the jobs of claims whose reply was lost; rescue will return them when their leases end",
			"queue", p.queue, "claims", len(left), "error", err)
	}
}

// releaseRetryPause is the pause between the last releases' tries on
// exit: short beside the 5 s they have, long enough not to spin on a
// store that refuses at once.
const releaseRetryPause = 50 * time.Millisecond

// releaseStale returns buffered jobs that waited longer than maxWait, and
// reports whether jobs are left in the buffer.
func (p *producer) releaseStale() (left bool) {
	p.mu.Lock()
	if len(p.buffer) == 0 {
		p.mu.Unlock()
		return false
	}
	now := time.Now()
	keep := p.buffer[:0]
	var stale []bufferedJob
	for _, j := range p.buffer {
		if p.startable(j, now) {
			keep = append(keep, j)
		} else {
			stale = append(stale, j)
		}
	}
	clear(p.buffer[len(keep):])
	p.buffer = keep
	left = len(keep) > 0
	p.toHandBackLocked(stale...)
	p.mu.Unlock()
	if len(stale) > 0 {
		p.releaseLate(stale)
	}
	return left
}

// startable reports whether j may start at now: its claim was sent less
// than maxWait ago.
func (p *producer) startable(j bufferedJob, now time.Time) bool {
	return j.claimedAt.After(now.Add(-p.maxWait))
}

// pushLocked appends the jobs of a claim sent at claimedAt, whose reply
// arrived at replyAt, to the buffer. mu is held.
//
// Appending past the end of a buffer that pop had sliced from its front
// would allocate a new array for nearly every claim of a drain: the jobs
// still waiting move to the front of the array instead, when it holds
// them all (BENCHMARKS.md, "Client CPU per job, and the drain targets on
// longer runs").
func (p *producer) pushLocked(rows []*backend.JobRow, claimedAt, replyAt time.Time) {
	if n := len(p.buffer); cap(p.buffer)-n < len(rows) {
		if n+len(rows) <= cap(p.bufferArray) {
			whole := p.bufferArray[:cap(p.bufferArray)]
			from := cap(whole) - cap(p.buffer) // where the waiting jobs start
			copy(whole, p.buffer)
			clear(whole[max(n, from) : from+n]) // their old places, but those just written
			p.buffer = whole[:n]
		} else {
			p.buffer = slices.Grow(p.buffer, len(rows))
			p.bufferArray = p.buffer[:0] // a new array, the buffer at its front
		}
	}
	for _, row := range rows {
		p.buffer = append(p.buffer, bufferedJob{row: row, claimedAt: claimedAt, replyAt: replyAt})
	}
}

// pop takes the first job out of the buffer. mu is held and the buffer is
// not empty.
func (p *producer) pop() bufferedJob {
	j := p.buffer[0]
	p.buffer[0] = bufferedJob{}
	p.buffer = p.buffer[1:]
	return j
}

// next gives a job goroutine that finished a job the next buffered one, if
// it still has half its lease to run; otherwise the goroutine's slot is
// given back. Either way run hears of it when it may have work to do: a
// slot to fill, a claim to send (the buffer reached lowWater), a late job to
// hand back. Nothing starts once the producer is stopping.
func (p *producer) next() (j bufferedJob, now time.Time, ok bool) {
	p.mu.Lock()
	// A job of a many-call kind is left to run, which gathers it.
	if len(p.buffer) > 0 && !p.isStopping() && p.manyRules(p.buffer[0].row) == nil {
		now = time.Now()
		if p.startable(p.buffer[0], now) {
			j = p.pop()
			low := len(p.buffer) == p.lowWater
			p.mu.Unlock()
			if low {
				p.signalFreed()
			}
			return j, now, true
		}
	}
	p.running--
	p.mu.Unlock()
	p.signalFreed()
	return bufferedJob{}, time.Time{}, false
}

// signalFreed tells run that a slot or the buffer changed; signals coalesce.
func (p *producer) signalFreed() {
	select {
	case p.freedCh <- struct{}{}:
	default:
	}
}

// isStopping reports whether stop was called.
func (p *producer) isStopping() bool {
	select {
	case <-p.stopCh:
		return true
	default:
		return false
	}
}

// releaseLate hands back, unstarted, jobs with less than half their lease
// left. Their lease may already have ended and the job been rescued, so the
// store may fence the release out: that is expected, not news. The log says
// which delay made them late.
func (p *producer) releaseLate(jobs []bufferedJob) {
	j := jobs[0]
	reply := j.replyAt.Sub(j.claimedAt)
	if reply >= p.maxWait/2 {
		p.logger.Warn("spool: claimed jobs released unstarted: their claim's reply came late (the process was paused, the network slow or the CPU starved), leaving less than half their lease",
			"queue", p.queue, "jobs", len(jobs), "reply_took", reply.Round(time.Millisecond), "start_window", p.maxWait)
	} else {
		p.logger.Info("spool: prefetched jobs released unstarted: they waited for a free worker until less than half their lease was left (prefetch more than the workers start within that time)",
			"queue", p.queue, "jobs", len(jobs), "waited", time.Since(j.replyAt).Round(time.Millisecond), "start_window", p.maxWait)
	}
	// The queue is named so that the outcome writer wakes this producer
	// once the release is written: the jobs are due, and a store need not
	// announce a release (MySQL's wake-ups read new jobs only), which left
	// them to the next poll.
	for _, j := range jobs {
		l := j.row.Lease()
		p.handedBack(l, p.out.addRun(backend.JobFinish{Lease: l, Outcome: backend.OutcomeRelease}, p.queue, nil, true))
	}
}

// release hands unstarted jobs back to the queue at once, their attempt given
// back. The caller recorded them in the ledger (toHandBackLocked).
func (p *producer) release(jobs []bufferedJob) {
	for _, j := range jobs {
		l := j.row.Lease()
		p.handedBack(l, p.out.add(backend.JobFinish{Lease: l, Outcome: backend.OutcomeRelease}))
	}
}

// handedBack takes the job under l out of the ledger once the outcome
// writer took its release (queued): from then on the writer writes it or
// names it (outcomeWriter.abandoned). A release the writer refused (a stop
// gave up) stays in the ledger, for the stop to name.
func (p *producer) handedBack(l backend.LeaseRef, queued bool) {
	if !queued {
		return
	}
	p.mu.Lock()
	delete(p.handingBack, l)
	p.mu.Unlock()
}
