package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
)

// newJobsInterval is how often Listen looks for jobs inserted by other
// processes while jobs keep coming: one primary-key range read from the
// last id it saw. MySQL has no LISTEN/NOTIFY; without it, a job inserted by
// another process waited for the next poll.
const newJobsInterval = 5 * time.Millisecond

// idleJobsInterval is how often Listen looks once no new job has come for
// idleAfter: the look interval doubles up to it, and goes back to
// newJobsInterval as soon as a look finds a job. Every worker process
// looks on its own, so idle fleets would otherwise cost the server 200
// reads a second per process for nothing; the price is up to
// idleJobsInterval more pickup for the first job after a quiet spell.
const (
	idleJobsInterval = 100 * time.Millisecond
	idleAfter        = 2 * time.Second
)

// headsInterval is how often a look that goes straight to the new jobs
// (the last look found some) also reads the heads (listen_heads.sql):
// wake-up notes and cancellation events are heard at least this often.
const headsInterval = watchCancelsInterval

// listenSlowInterval is how often the heads carry the figure of
// listen_slow_col.sql, for the cancellation events that committed out of
// seq order (the holder's next heartbeat finds those too).
const listenSlowInterval = 500 * time.Millisecond

// newJobsBatch bounds the ids (and the notes) one read returns; more means
// another read at once.
const newJobsBatch = 1000

// routeSpan is how many consecutive job ids share a route: the wake-ups of
// a queue's jobs with ids in one span go to the same process. Every
// process reads the same ids, so every process computes the same route for
// a job whatever ids its own looks read together; a span of several ids
// makes a look that finds a few new jobs wake one process, not one per
// job, while a backlog (many spans) still wakes every process.
const routeSpan = 64

// Wake-up notes (spool_wake_notes, schema 17). A process's announced note
// (backend.WakeRouter.Announce) is stored as notePrefix+SOURCE+" "+NOTE,
// SOURCE naming the backend that wrote it; a passed-on wake-up as
// passPrefix+HOPS+":"+QUEUE; a resume (QueuePause) as resumePrefix+QUEUE,
// which wakes the queue in every listener. Listeners ignore the notes of
// kinds they do not know.
//
// Each note written costs the server a durable commit, so a process
// rewrites an unchanged note only every noteRefresh, and every listener
// re-delivers each source's last note every noteRedeliver until noteLife
// has passed since it read it: the routing's members (announced every
// second, forgotten 3.5 s after the last) stay heard, and a process that
// ended without its leave note is forgotten noteLife after its last note.
const (
	notePrefix    = "note:"
	passPrefix    = "pass:"
	resumePrefix  = "resume:"
	noteRefresh   = 3 * time.Second
	noteLife      = 8 * time.Second
	noteRedeliver = time.Second
	// noteBacklog is how many notes below the newest a Listen reads when
	// it starts, for the standing notes of the processes already there.
	noteBacklog = 64
)

// Pruning of the wake-up notes: every notesPruneEvery notes it writes, a
// process deletes those more than notesKept seqs below its own, which
// every listener has read long since.
const (
	notesPruneEvery = 64
	notesKept       = 4096
)

// listenState is what Listen's looks remember between them.
type listenState struct {
	lastJob, lastNote int64
	// cancelMax is the heads' highest event seq, cancelSum the figure of
	// listen_slow_col.sql and pausedSum that of the paused queues, at the
	// last reads of the cancellation events and of the paused queues.
	cancelMax, cancelSum, pausedSum int64
	// cancels holds the cancellation events seen.
	cancels cancelsSeen
	// paused is the set of paused queues at the last read.
	paused map[string]bool
	// standing holds each source's last announced note and when it was
	// read, re-delivered every noteRedeliver until noteLife has passed.
	standing map[string]standingNote
	// gaps holds the ids below lastJob that the reads of new jobs found
	// missing (newJobGaps).
	gaps []jobGap
}

// Listen's gaps. AUTO_INCREMENT values are taken when an insert runs and
// become visible when it commits, so concurrent inserts commit out of id
// order: a read of the ids above the last one seen can find id N+1 while
// N's insert is still committing, and the next read starts above N+1.
// With no list naming it, such a job waited for a head claim (listed.go),
// and those jobs made much of pickup's tail (BENCHMARKS.md, history,
// 2026-12-01g: "MariaDB pickup's tail at 1 and 8 processes"). So each read
// of new jobs also reads the ids it found missing, for gapLooks reads
// after it found them: an id that comes in time is listed and woken like
// any new job. Ids that never come (a rolled-back insert, an
// AUTO_INCREMENT range reserved and not used) are dropped after gapLooks
// reads; a job that commits later still waits for a head claim. A read
// that finds more than gapMax ids missing keeps none of them: that is no
// insert in flight but a range left unused, and its reads would grow.
const (
	gapLooks = 10
	gapMax   = 64
)

// jobGap is an id a read of new jobs found missing, and how many reads
// have looked for it since.
type jobGap struct {
	id    int64
	looks int
}

type standingNote struct {
	note string
	read time.Time
}

// heads is a read of listen_heads.sql (with the lease and the recent
// cancellation events, in its variants).
type heads struct {
	job, note, cancelMax, paused int64
	cancelSum                    int64
	// lease is the looker's lease, when leaseRead.
	lease     lease
	leaseRead bool
}

// Listen implements backend.Notifier. MySQL has no notifications, so it
// looks, every newJobsInterval while jobs keep coming and up to
// idleJobsInterval once none has come for idleAfter. A look reads the
// heads (listen_heads.sql: one statement of scalar reads, the highest job
// id, note seq and cancellation event seq and a figure of the paused
// queues), then the rows of the parts that moved; while jobs keep coming,
// it reads the new jobs at once and the heads every headsInterval. Every
// listenSlowInterval the heads also carry a figure of the recent
// cancellation events (listen_heads_slow.sql), and a listener that does
// not hold the looker's lease reads the lease with them
// (listen_heads_lease.sql; looker.go). It wakes the queues of jobs other
// processes inserted (routed, when Options.WakeRouting is on: every
// process reads the same ids, and the engine wakes only the process the
// route picks, see routeSpan), delivers the wake-up notes, wakes a queue
// that another process resumed and reports cancelled running jobs as
// WatchCancels does.
// A job whose insert commits after a later id's was seen is reported by
// one of the next gapLooks reads of new jobs (Listen's gaps); one that
// commits later than that is not reported by itself: a head claim, the
// next insert into its queue, or the client's poll finds it.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &listenState{cancels: cancelsSeen{}, paused: map[string]bool{}, standing: map[string]standingNote{}}
	var lk *looker
	if b.looker {
		lk = &looker{b: b, name: b.noteSource, key: b.wakeQueuesKey()}
		lk.idle.Store(true) // as the process starts: see below
	}
	h, err := b.readHeads(ctx, lk.setKey(), lk != nil, true)
	if err != nil {
		return err
	}
	st.lastJob, st.lastNote = h.job, max(0, h.note-noteBacklog)
	if lk != nil && !h.lease.present {
		if err := b.lookerInit(ctx, lk, h.job); err != nil {
			return err
		}
	}
	// The cancellation events and paused queues there are now were made
	// before ready: recorded, not reported.
	if err := b.readCancels(ctx, st, h, nil); err != nil {
		return err
	}
	if err := b.readPaused(ctx, st, h.paused, nil); err != nil {
		return err
	}
	if err := b.readNotes(ctx, st, true, onWake); err != nil {
		return err
	}
	// Jobs this process released from waiting (workflow.go) are heard
	// from its own hub: they are no new ids.
	hubReady := make(chan struct{})
	go func() { _ = b.released.Listen(ctx, func() { close(hubReady) }, onWake) }()
	select {
	case <-hubReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	ready()
	// A process starts as an idle one: no new job has been seen, and the
	// jobs already there are its start's claim's (the engine wakes the
	// queues at ready). Started busy, every process of a fleet read the
	// new ids 200 times a second for its first idleAfter, whether or not
	// any came: at 8 processes, most of the server's statements in a
	// drain of a backlog inserted before them.
	var (
		interval  = newJobsInterval
		lastFound = time.Now().Add(-idleAfter)
		lastHeads = time.Now()
		lastSlow  = time.Now()
		lastSent  = time.Now()
		busy      = false
		// watching: the last heads showed the looker's lease held by
		// another process; holderSlow: its holder had no idle worker at
		// its last renewal.
		watching, holderSlow = false, false
		// headJob is the newest job id the last heads showed.
		headJob = h.job
		// watchInterval is the interval of a watching listener's looks.
		watchInterval = lookerWatch
	)
	if lk != nil {
		go lk.renew(ctx)
		defer func() {
			// The lease goes at once to the next process that looks,
			// not after it lapses.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = lk.release(rctx)
		}()
	}
	// looks reports whether this Listen reads the new ids: always, unless
	// the looker's lease decides.
	looks := func() bool { return lk == nil || lk.holding() }
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		readJobs := busy && looks()
		// moved: the heads read at this look showed a newer job than the
		// last heads did.
		moved := false
		if !readJobs || time.Since(lastHeads) >= headsInterval {
			slow := time.Since(lastSlow) >= listenSlowInterval
			if lk != nil {
				if err := lk.rekey(ctx); err != nil {
					return err
				}
			}
			// A listener that does not hold the looker's lease reads it
			// at every look; the holder hears of a lost lease from its
			// renewals.
			withLease := lk != nil && !lk.holding()
			h, err := b.readHeads(ctx, lk.setKey(), withLease, slow)
			if err != nil {
				return err
			}
			lastHeads = time.Now()
			moved, headJob = h.job > headJob, max(headJob, h.job)
			if !slow {
				h.cancelSum = st.cancelSum
			} else {
				lastSlow = lastHeads
			}
			if lk != nil && h.leaseRead {
				// fresh: ids this Listen has not accounted for.
				fresh := h.job > max(st.lastJob, lk.othersCursor(h.lease))
				if fresh && !lk.holding() {
					// A take for new ids holds the lease as while jobs
					// come (as the end of this look will say).
					lk.idle.Store(false)
				}
				took, err := b.lookerTurn(ctx, lk, st, h, onWake)
				if err != nil {
					return err
				}
				if took && fresh && !busy {
					// A holder that took the lease for new ids looks
					// every newJobsInterval, for idleAfter at least.
					busy, lastFound, interval = true, time.Now(), newJobsInterval
					lk.idle.Store(false)
				}
				watching = !lk.holding() && h.lease.live && h.lease.holder != lk.name
				holderSlow = h.lease.slow
				if !lk.holding() {
					// Another process's holder read the ids up to the
					// cursor and woke its queues' processes for them.
					st.lastJob = max(st.lastJob, lk.othersCursor(h.lease))
				}
			}
			readJobs = looks() && (readJobs || h.job > st.lastJob)
			if h.note > st.lastNote {
				if err := b.readNotes(ctx, st, false, onWake); err != nil {
					return err
				}
			}
			if h.cancelMax != st.cancelMax || h.cancelSum != st.cancelSum {
				if err := b.readCancels(ctx, st, h, onWake); err != nil {
					return err
				}
			}
			if h.paused != st.pausedSum {
				if err := b.readPaused(ctx, st, h.paused, onWake); err != nil {
					return err
				}
			}
		}
		found := 0
		if readJobs {
			if found, err = b.readNewJobs(ctx, st, onWake); err != nil {
				return err
			}
			if lk != nil {
				lk.cursor.Store(st.lastJob)
			}
		}
		now := time.Now()
		if now.Sub(lastSent) >= noteRedeliver {
			lastSent = now
			st.redeliver(now, onWake)
		}
		if found > 0 {
			interval, lastFound = newJobsInterval, now
		}
		busy = found > 0 || now.Sub(lastFound) <= idleAfter
		if now.Sub(lastFound) > idleAfter {
			interval = min(2*interval, idleJobsInterval)
		}
		if lk != nil && !lk.holding() && watching {
			// Another process reads the new ids; this one looks at the
			// lease now and then: while jobs come, every lookerWatch when
			// the holder has no idle worker (this process may take the
			// lease from it), and every lookerBusyWatch when it has one;
			// less and less often while no job comes.
			if moved {
				watchInterval = lookerWatch
				if !holderSlow {
					watchInterval = lookerBusyWatch
				}
			} else {
				watchInterval = min(2*watchInterval, lookerIdleWatch)
			}
			interval = watchInterval
		}
		if lk != nil {
			// A holder with no new job for idleAfter keeps the lease as
			// the fleet's idle looker, renewed less often.
			lk.idle.Store(!busy)
		}
		t.Reset(interval)
	}
}

// lookerInit makes the looker's row of lk's set of queues, with cursor as
// the highest id read, if there is none.
func (b *Backend) lookerInit(ctx context.Context, lk *looker, cursor int64) error {
	if _, err := b.db.ExecContext(ctx, b.sql.lookerInit, lk.key, cursor); err != nil {
		return fmt.Errorf("listen: make the looker's row: %w", err)
	}
	return nil
}

// lookerTurn takes the looker's lease when h shows it should (looker.
// wants), and drops it when h shows another holder; it reports whether it
// took the lease. A process that takes it reads on from the lease's
// cursor; one that takes it from a holder that stopped without giving it
// up, or from one with no idle worker, also wakes every queue, for the
// jobs that holder read and did not claim.
func (b *Backend) lookerTurn(ctx context.Context, lk *looker, st *listenState, h heads, onWake func(backend.Wake)) (bool, error) {
	if !h.lease.present {
		return false, b.lookerInit(ctx, lk, st.lastJob)
	}
	if lk.holding() {
		if h.lease.live && h.lease.holder != lk.name {
			lk.drop()
		}
		return false, nil
	}
	if !lk.wants(h, st.lastJob) {
		return false, nil
	}
	from := max(st.lastJob, lk.othersCursor(h.lease), h.job-lookerBacklog)
	took, err := lk.hold(ctx, from)
	if err != nil || !took {
		return false, err
	}
	st.lastJob = from
	lk.cursor.Store(from)
	if h.lease.live && h.lease.holder != lk.name || !h.lease.live && !h.lease.released {
		onWake(backend.Wake{}) // every queue: what the last holder read and did not claim
	}
	return true, nil
}

// readHeads reads the heads in one statement: listen_heads.sql, with the
// looker's lease of the set of queues key names when lease, and with the
// figure of the recent cancellation events when slow (the _lease and
// _slow variants). Each look is one round trip: an idle process's cost to
// the server is mostly its round trips, each of which wakes a server
// thread.
func (b *Backend) readHeads(ctx context.Context, key string, lease, slow bool) (heads, error) {
	var (
		h    heads
		ls   sql.NullString
		q    string
		args []any
		dest = []any{&h.job, &h.note, &h.cancelMax, &h.paused}
	)
	switch {
	case lease && slow:
		q, args, dest = b.sql.listenHeadsLeaseSlow, []any{key}, append(dest, &ls, &h.cancelSum)
	case lease:
		q, args, dest = b.sql.listenHeadsLease, []any{key}, append(dest, &ls)
	case slow:
		q, dest = b.sql.listenHeadsSlow, append(dest, &h.cancelSum)
	default:
		q = b.sql.listenHeads
	}
	b.headsReads.Add(1)
	if err := b.db.QueryRowContext(ctx, q, args...).Scan(dest...); err != nil {
		return h, fmt.Errorf("listen: read the newest job, note and event: %w", err)
	}
	if lease {
		var err error
		if h.lease, err = parseLease(ls); err != nil {
			return h, fmt.Errorf("listen: %w", err)
		}
		h.leaseRead = true
	}
	return h, nil
}

// readNewJobs reads the jobs above st.lastJob, and those of its gaps,
// and wakes their queues, and reports how many it found.
func (b *Backend) readNewJobs(ctx context.Context, st *listenState, onWake func(backend.Wake)) (int, error) {
	found := 0
	for {
		n := 0
		routes, queues := map[queueSpan]bool{}, map[string]bool{}
		listed := map[string][]int64{}
		from := st.lastJob
		var rows *sql.Rows
		var err error
		if len(st.gaps) > 0 {
			gaps := make([]int64, len(st.gaps))
			for i, g := range st.gaps {
				gaps[i] = g.id
			}
			rows, err = b.db.QueryContext(ctx, b.sql.newJobsGaps+inList(gaps)+" ORDER BY id LIMIT ?", from, newJobsBatch)
		} else {
			rows, err = b.db.QueryContext(ctx, b.sql.newJobs, from, newJobsBatch)
		}
		if err != nil {
			return found, fmt.Errorf("listen: read new jobs: %w", err)
		}
		var above []int64 // the ids read above from, in order
		for rows.Next() {
			var (
				id    int64
				queue string
			)
			if err := rows.Scan(&id, &queue); err != nil {
				rows.Close()
				return found, fmt.Errorf("listen: read new jobs: %w", err)
			}
			if id > from {
				above = append(above, id)
			} else {
				st.gaps = slices.DeleteFunc(st.gaps, func(g jobGap) bool { return g.id == id })
			}
			st.lastJob, n = max(st.lastJob, id), n+1
			listed[queue] = append(listed[queue], id)
			if b.routeWakes {
				routes[queueSpan{queue, id / routeSpan}] = true
			} else {
				queues[queue] = true
			}
		}
		if err := rows.Err(); err != nil {
			return found, fmt.Errorf("listen: read new jobs: %w", err)
		}
		st.gaps = newJobGaps(st.gaps, from, above)
		// Listed before the wake-ups: the claims they send may take
		// these jobs by id (listed.go).
		for q, ids := range listed {
			b.listed.add(q, ids)
		}
		for r := range routes {
			onWake(backend.Wake{Queue: r.queue, Route: jobRoute(r.queue, r.span)})
		}
		for q := range queues {
			onWake(backend.Wake{Queue: q})
		}
		found += n
		if n < newJobsBatch {
			return found, nil
		}
	}
}

// newJobGaps returns gaps after a read of new jobs: each looked for once
// more, those looked for gapLooks times dropped, and the ids missing
// between from and the ids read above it (ascending) added, when there
// are at most gapMax of them and the gaps stay within gapMax.
func newJobGaps(gaps []jobGap, from int64, above []int64) []jobGap {
	out := gaps[:0]
	for _, g := range gaps {
		if g.looks++; g.looks < gapLooks {
			out = append(out, g)
		}
	}
	if len(above) == 0 {
		return out
	}
	missing := above[len(above)-1] - from - int64(len(above))
	if missing <= 0 || missing > gapMax || len(out)+int(missing) > gapMax {
		return out
	}
	next := from + 1
	for _, id := range above {
		for ; next < id; next++ {
			out = append(out, jobGap{id: next})
		}
		next = id + 1
	}
	return out
}

// readNotes reads the wake-up notes above st.lastNote and delivers them:
// announced notes (kept as their source's standing note) and, unless
// first (the notes written before Listen started), passed-on wake-ups and
// resumed queues.
func (b *Backend) readNotes(ctx context.Context, st *listenState, first bool, onWake func(backend.Wake)) error {
	now := time.Now()
	for {
		n := 0
		rows, err := b.db.QueryContext(ctx, b.sql.wakeNotesNew, st.lastNote, newJobsBatch)
		if err != nil {
			return fmt.Errorf("listen: read wake-up notes: %w", err)
		}
		var wakes []backend.Wake
		for rows.Next() {
			var (
				seq  int64
				body string
			)
			if err := rows.Scan(&seq, &body); err != nil {
				rows.Close()
				return fmt.Errorf("listen: read wake-up notes: %w", err)
			}
			st.lastNote, n = max(st.lastNote, seq), n+1
			if rest, ok := strings.CutPrefix(body, notePrefix); ok {
				if src, note, ok := strings.Cut(rest, " "); ok {
					st.standing[src] = standingNote{note: note, read: now}
					wakes = append(wakes, backend.Wake{Note: note})
				}
			} else if rest, ok := strings.CutPrefix(body, passPrefix); ok && !first {
				hops, queue, _ := strings.Cut(rest, ":")
				if h, err := strconv.Atoi(hops); err == nil && queue != "" {
					wakes = append(wakes, backend.Wake{Queue: queue, Route: noteRoute(seq), Hops: h})
				}
			} else if queue, ok := strings.CutPrefix(body, resumePrefix); ok && !first && queue != "" {
				wakes = append(wakes, backend.Wake{Queue: queue}) // not routed: a resume is rare, and any process's workers may wait for the queue
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("listen: read wake-up notes: %w", err)
		}
		// Notes first: a member heard in this read already counts for
		// the routes of the wake-ups after it.
		for _, w := range wakes {
			if w.Note != "" {
				onWake(w)
			}
		}
		for _, w := range wakes {
			if w.Note == "" {
				onWake(w)
			}
		}
		if n < newJobsBatch {
			return nil
		}
	}
}

// redeliver delivers every standing note read within noteLife, and
// forgets the others.
func (st *listenState) redeliver(now time.Time, onWake func(backend.Wake)) {
	for src, n := range st.standing {
		if now.Sub(n.read) > noteLife {
			delete(st.standing, src)
			continue
		}
		onWake(backend.Wake{Note: n.note})
	}
}

// readCancels reads the cancellation events, reports through onWake (when
// not nil) the ones not seen before, and records h's figures as those they
// answer.
func (b *Backend) readCancels(ctx context.Context, st *listenState, h heads, onWake func(backend.Wake)) error {
	ids, err := b.readCancelEvents(ctx, st.cancels)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	st.cancelMax, st.cancelSum = h.cancelMax, h.cancelSum
	if onWake != nil {
		for _, id := range ids {
			onWake(backend.Wake{CancelledID: id})
		}
	}
	return nil
}

// readPaused reads the paused queues, wakes through onWake (when not nil)
// those resumed since the last read, and records sum as the heads' figure
// it answers.
func (b *Backend) readPaused(ctx context.Context, st *listenState, sum int64, onWake func(backend.Wake)) error {
	all, err := b.QueuePausedAll(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	now := make(map[string]bool, len(all))
	for _, q := range all {
		now[q.Queue] = true
	}
	if onWake != nil {
		for q := range st.paused {
			if !now[q] {
				onWake(backend.Wake{Queue: q}) // resumed elsewhere
			}
		}
	}
	st.paused, st.pausedSum = now, sum
	return nil
}

// queueSpan names the routeSpan ids of a queue that route alike.
type queueSpan struct {
	queue string
	span  int64
}

// jobRoute is the Route of the wake-up for queue's new jobs with ids in
// span.
func jobRoute(queue string, span int64) uint64 {
	return backend.RouteOf(queue, uint64(span))
}

// noteRoute is the Route of a passed-on wake-up, from its note's seq (the
// same in every listener).
func noteRoute(seq int64) uint64 {
	return backend.RouteOf(passPrefix, uint64(seq))
}

// Announce implements backend.WakeRouter: every listener, this one's
// included, reads the note at its next look and re-delivers it every
// noteRedeliver until noteLife has passed. An unchanged note is written
// again only every noteRefresh.
func (b *Backend) Announce(ctx context.Context, note string) error {
	b.noteMu.Lock()
	fresh := note == b.noteLast && time.Since(b.noteAt) < noteRefresh
	b.noteMu.Unlock()
	if fresh {
		return nil
	}
	if err := b.writeNote(ctx, notePrefix+b.noteSource+" "+note); err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	b.noteMu.Lock()
	b.noteLast, b.noteAt = note, time.Now()
	b.noteMu.Unlock()
	return nil
}

// PassOn implements backend.WakeRouter.
func (b *Backend) PassOn(ctx context.Context, queue string, hops int) error {
	if err := b.writeNote(ctx, passPrefix+strconv.Itoa(hops)+":"+queue); err != nil {
		return fmt.Errorf("pass a wake-up on: %w", err)
	}
	return nil
}

// RoutesWakes implements backend.WakeRouter: true unless Options.WakeRouting
// is off.
func (b *Backend) RoutesWakes() bool { return b.routeWakes }

// writeNote appends a wake-up note, and every notesPruneEvery notes drops
// the old ones.
func (b *Backend) writeNote(ctx context.Context, body string) error {
	res, err := b.db.ExecContext(ctx, b.sql.wakeNote, body)
	if err != nil {
		return err
	}
	return b.noteWritten(ctx, res)
}

// noteWritten counts a note written (res is its INSERT's result), and every
// notesPruneEvery notes drops the old ones.
func (b *Backend) noteWritten(ctx context.Context, res sql.Result) error {
	if b.notesWritten.Add(1)%notesPruneEvery == 0 {
		if seq, err := res.LastInsertId(); err == nil && seq > notesKept {
			if _, err := b.db.ExecContext(ctx, b.sql.wakeNotesPrune, seq-notesKept); err != nil {
				return fmt.Errorf("prune wake-up notes: %w", err)
			}
		}
	}
	return nil
}

// newNoteSource returns a backend's name in the notes it announces.
func newNoteSource() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
