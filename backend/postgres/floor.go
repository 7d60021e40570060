package postgres

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Claim floors keep claims fast while something pins the cleanup horizon.
//
// A claim moves a row out of the pending index's predicate, but the index
// entry of the pending version stays until VACUUM removes it, and VACUUM
// cannot while any snapshot older than the claim is open (a long report, a
// forgotten psql session, a replica with hot_standby_feedback). Claims read
// the pending index from the queue's head, so every claim walks every entry
// claimed since that snapshot was taken, a heap visit each: with a snapshot
// held for 60 s at 1,000 jobs/s, claim p99 went from 2.1 ms to 22 ms
// (bench bloat, BENCHMARKS.md), growing with the hold.
//
// A floor is the claim-order key (priority, run_at, id) of the last job a
// queue's claims took. Pending rows of its priority at or below it were
// claimed, locked by another claimer, or not yet committed when a claim
// passed them (rows not yet due sort above it: their run_at is later than
// any claimed row's). The next claim reads the floor's priority only above
// the floor, so it reads only live entries there, and higher priorities
// (lower numbers) whole: a scheduled job or a retry of a higher priority
// that comes due is never behind a floor, at the price of walking that
// priority's dead entries when a snapshot is held. Rows of the floor's
// priority that become pending below it later are stragglers, and each way
// one can arise lowers the floor again:
//   - an insert that commits after claims passed its key (a transaction's
//     run_at is its start time, and ids are drawn before commit): the
//     insert trigger's notification carries a lower bound of the keys the
//     statement inserted (priority, run_at), and Listen lowers the floor
//     below it before it wakes the producer;
//   - a retry, snooze or release written by this backend, a rescue run by
//     it, an admin retry through it: their statements return the new keys;
//   - anything else (a claim rolled back by another process, another
//     process's release or retry of a higher-priority job, a notification
//     lost with its connection): a probe, off the claim path, reads the
//     lowest pending key at or below the floor without locking and lowers
//     the floor to it. Probes run every 1-10 s per queue, at most as often
//     as 50 times their own duration allows (a bloated head is slow to
//     read: 190 ms behind 800,000 dead entries), and never delay a claim:
//     as full claims in the claim path they held every job inserted
//     meanwhile (bench bloat, 5 min hold: pickup p99 5.7x the unblocked).
//
// Floors are used only while Listen is subscribed; without the
// notifications every claim starts from the head, as before.
//
// A floor is a process's own, but the processes working a backlog take
// turns on its claim lock: between two claims of one process the others'
// claims took the rows above its floor, and its next claim walked all
// their entries, still in the index (docs/internals-postgres.md, step 3).
// So a claim under the claim lock also reads the queue's shared floor
// (spool_claim_floors, schema 31), where the claim before it ended,
// whichever process sent it, starts at the higher of the two, and writes
// its own end there. A row pending below the shared floor is one the
// claims passed (a late commit) or one written back below them, and each
// way that arises lowers some process's own floor as above. The key so
// reported also caps where that process's claims may start
// (queueFloor.cap), however high the shared floor, so the process told of
// a row does not skip it; the probe below each process's own floor, which
// its claims keep near the shared one, finds the rest.
type claimFloors struct {
	mu         sync.Mutex
	listening  int // subscribed Listen calls
	queues     map[string]*queueFloor
	probeEvery time.Duration // tests: a fixed interval between probes
}

// claimKey is a position in claim order.
type claimKey struct {
	priority int16
	runAt    time.Time
	id       int64
}

// headKey is below every row: priorities start at 0.
var headKey = claimKey{priority: -1, runAt: time.Unix(0, 0).UTC()}

func (k claimKey) less(o claimKey) bool {
	if k.priority != o.priority {
		return k.priority < o.priority
	}
	if c := k.runAt.Compare(o.runAt); c != 0 {
		return c < 0
	}
	return k.id < o.id
}

// justBelow returns the largest bound that still lets a claim see k.
func (k claimKey) justBelow() claimKey {
	return claimKey{priority: k.priority, runAt: k.runAt, id: k.id - 1}
}

// queueFloor is one queue's floor.
type queueFloor struct {
	bound     claimKey  // claims read keys strictly above this
	valid     bool      // bound is set; else claims start at the head
	gen       uint64    // bumped by every reset: a claim begun before one sets nothing
	inflight  int       // claims begun and not ended
	reported  *claimKey // the lowest bound a report asked for while claims were in flight
	probing   bool      // a probe below the floor is running
	nextProbe time.Time // the next probe is due then
	// cap, when set, is the lowest bound a report asked for that no
	// claim has passed since: no claim starts above it, whatever the
	// shared floor. A claim that began after the last report and took a
	// job above it clears it. capSeq counts the reports.
	cap    *claimKey
	capSeq uint64
}

// Probes run at least this often per queue, and at most as often as
// probeFactor times the last probe's duration allows, so that reading a
// bloated head costs at most 1/probeFactor of one connection's time.
const (
	probeMin    = time.Second
	probeMax    = 10 * time.Second
	probeFactor = 50
)

// claimTicket is what begin hands to end.
type claimTicket struct {
	queue   string
	bound   claimKey
	full    bool // from the head: no floor
	probe   bool // the caller should start a probe below bound
	counted bool // begin counted the claim in flight
	gen     uint64
	// shared is whether the claim may start at the queue's shared floor,
	// if higher than bound: it has a floor of its own (not full). cap, when
	// set, is the highest start it may take. capSeq is the queue's report
	// count when the claim began.
	shared bool
	cap    *claimKey
	capSeq uint64
}

// begin returns where a claim of queue should start.
func (f *claimFloors) begin(queue string, now time.Time) claimTicket {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := claimTicket{queue: queue, bound: headKey, full: true}
	if f.listening == 0 {
		return t
	}
	q := f.queue(queue)
	q.inflight++
	t.counted, t.gen, t.capSeq = true, q.gen, q.capSeq
	if q.valid {
		t.bound, t.full, t.shared, t.cap = q.bound, false, true, q.cap
		if !q.probing && !now.Before(q.nextProbe) {
			t.probe, q.probing = true, true
		}
	}
	return t
}

// probed records a probe of queue that found key (nil: nothing at or below
// the floor) and took dur.
func (f *claimFloors) probed(queue string, key *claimKey, dur time.Duration, now time.Time) {
	f.mu.Lock()
	q := f.queue(queue)
	q.probing = false
	q.nextProbe = now.Add(f.probeInterval(dur))
	f.mu.Unlock()
	if key != nil {
		f.lower(queue, *key)
	}
}

// end records a claim that returned jobs up to last (nil: none). The floor
// rises to last unless a report during the claim asked for a lower one.
func (f *claimFloors) end(t claimTicket, last *claimKey, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !t.counted {
		return
	}
	q := f.queue(t.queue)
	q.inflight--
	defer func() {
		if q.inflight == 0 {
			q.reported = nil
		}
	}()
	if q.gen != t.gen {
		return
	}
	if q.cap != nil && q.capSeq == t.capSeq && last != nil && q.cap.less(*last) {
		q.cap = nil // this claim started at or below it and went past it
	}
	if t.full {
		q.nextProbe = now.Add(f.probeInterval(0))
	}
	next, ok := q.bound, q.valid
	if last != nil && (!ok || next.less(*last)) {
		next, ok = *last, true
	}
	if !ok {
		// A claim from the head that found nothing leaves no floor: there
		// is nothing below to skip.
		return
	}
	if q.reported != nil && q.reported.less(next) {
		next = *q.reported
	}
	q.bound, q.valid = next, true
}

// probeInterval is the time from a probe that took dur to the next.
func (f *claimFloors) probeInterval(dur time.Duration) time.Duration {
	if f.probeEvery > 0 {
		return f.probeEvery
	}
	return min(probeMax, max(probeMin, probeFactor*dur))
}

// lower makes the claims of queue see key again: the current floor drops
// below it, and so does any floor a claim now in flight would set.
func (f *claimFloors) lower(queue string, key claimKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.queues[queue]
	if f.listening == 0 || !ok {
		return // no claim of queue has begun: nothing to lower
	}
	b := key.justBelow()
	if q.valid && b.less(q.bound) {
		q.bound = b
	}
	if q.inflight > 0 && (q.reported == nil || b.less(*q.reported)) {
		q.reported = &b
	}
	if q.cap == nil || b.less(*q.cap) {
		q.cap = &b
	}
	q.capSeq++
}

// reset makes the next claim of queue start at the head.
func (f *claimFloors) reset(queue string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q, ok := f.queues[queue]; ok {
		q.valid = false
		q.gen++
	}
}

// resetAll makes the next claim of every queue start at the head.
func (f *claimFloors) resetAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.queues {
		q.valid = false
		q.gen++
	}
}

// listen counts a Listen subscription in (+1) or out (-1). Floors are used
// while one is live; with none, notifications may be missed, so every claim
// starts at the head. Every change forgets the floors.
func (f *claimFloors) listen(delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listening += delta
	for _, q := range f.queues {
		q.valid = false
		q.gen++
	}
}

func (f *claimFloors) queue(name string) *queueFloor {
	q, ok := f.queues[name]
	if !ok {
		if f.queues == nil {
			f.queues = make(map[string]*queueFloor)
		}
		q = &queueFloor{}
		f.queues[name] = q
	}
	return q
}

// parseInsertNotice parses an insert notification's payload, "QUEUE PRIORITY
// RUN_AT_MICROS" (migration 2: a lower bound of the keys the statement
// inserted), the same followed by "ID,ID…" (this backend's own inserts:
// every job announced, noticeIDs), or a bare "QUEUE" (migration 1). ok is
// false for a bare queue or a payload it cannot read.
func parseInsertNotice(payload string) (queue string, key claimKey, ok bool) {
	fields := strings.Fields(payload)
	if len(fields) != 3 && len(fields) != 4 {
		if len(fields) > 0 {
			return fields[0], claimKey{}, false
		}
		return payload, claimKey{}, false
	}
	prio, err1 := strconv.ParseInt(fields[1], 10, 16)
	us, err2 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil {
		return fields[0], claimKey{}, false
	}
	// The trigger's microseconds may be a double's rounding (PostgreSQL
	// before 14): a microsecond of slack keeps the lowered floor below the
	// rows whatever the rounding. Id 0 is below every id.
	return fields[0], claimKey{priority: int16(prio), runAt: time.UnixMicro(us - 1).UTC()}, true
}

// noticeIDs returns the ids an insert notification lists, its fourth field
// (duePayloads, insert_wake_now.sql), or nil when it lists none or the
// field does not read as ids: the wake-up then names no jobs.
func noticeIDs(payload string) []int64 {
	fields := strings.Fields(payload)
	if len(fields) != 4 {
		return nil
	}
	ids := make([]int64, 0, strings.Count(fields[3], ",")+1)
	for f := range strings.SplitSeq(fields[3], ",") {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil || id <= 0 {
			return nil
		}
		ids = append(ids, id)
	}
	return ids
}
