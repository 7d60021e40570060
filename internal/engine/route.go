package engine

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// Wake-up routing, for stores whose wake-ups reach every listening process
// (backend.WakeRouter). Without it every process claims for every
// notification and all but one find nothing: with 8 processes at 1,000
// jobs a second, 86% of the claims were empty and the server's CPU per
// picked-up job doubled (BENCHMARKS.md, "Worker processes on simulated
// hosts").
//
// Each process announces, every announceEvery, its client id and the
// queues it works; every process keeps the members it heard within
// memberTTL. A routable wake-up is answered by the member of its queue
// whose hash with the wake-up's Route number is highest (rendezvous
// hashing): every process computes the same answer from the same members,
// and one process claims. A process that took a full claim after a routed
// wake-up (more jobs may wait), or had no room to claim, passes the
// wake-up on (WakeRouter.PassOn), at most once per other member, so a
// burst spreads over the processes one claim at a time.
//
// A wake-up whose store gives it a window number (backend.Wake.Window: its
// queue and the short span of time its jobs came due in) is routed by that
// number instead, when every live member of its queue announced that it
// routes by windows (its note lists windowCap): a window's wake-ups then
// all go to one process, whose claim, sent for the first of them, takes
// the jobs committed before it whoever's wake-up announced them; the
// producer sends no claim for a wake-up whose jobs its own claims took
// (producer.wakeJobs). Routed each to a process of its own, those jobs
// were each claimed twice: by the claim that took them and by their own
// process's claim, which found nothing. A member of an earlier version
// lists no windowCap, and while one is heard every process routes by
// Route, as it does.
//
// When views differ (a member joining or ending between two notes) two
// processes may answer a wake-up, which costs a claim, or none, which
// leaves the job to the next poll (PollInterval); a process that stops
// announces its leave. A process that has not heard its own note within
// memberTTL (its notes are not getting through) answers every wake-up, as
// do processes of versions that do not route: routing only ever removes
// claims that other members make.
const (
	announceEvery = time.Second
	memberTTL     = 3500 * time.Millisecond
	// maxNoteBytes bounds a note (PostgreSQL's payloads stop at 8,000
	// bytes): a process whose queues do not fit announces nothing and
	// answers every wake-up.
	maxNoteBytes = 7000
)

// Note formats: "spool-member\x1fID\x1fQUEUE\x1fQUEUE…\x1f:CAP" and
// "spool-leave\x1fID"; queue names and client ids never hold \x1f (a
// client id that does makes the process answer every wake-up). Entries
// after the id that start with ':', which no queue name does, name what
// the member can do (windowCap); earlier versions read them as queues of
// that name, which no process works.
const (
	noteMember = "spool-member"
	noteLeave  = "spool-leave"
	noteSep    = "\x1f"
	// windowCap says the member routes by Wake.Window when every member
	// of the queue does.
	windowCap = ":window"
)

// router decides which wake-ups this process answers.
type router struct {
	wr     backend.WakeRouter
	self   string
	queues []string // this process's queues, sorted
	logger *slog.Logger

	// left is set once this process has announced its leave: it sends
	// no more member notes.
	left atomic.Bool
	// listening is set while the listener's subscription is in place:
	// notes are sent only then (through a transaction pooler, where no
	// subscription hears anything, none are).
	listening atomic.Bool
	// subscribed is signalled when the subscription is (again) in place:
	// the note goes out at once.
	subscribed chan struct{}

	mu      sync.Mutex
	members map[string]*member // by client id, this process's included
	// heardSelf is when this process last heard its own note.
	heardSelf time.Time
}

// member is a process heard of, and the queues it works.
type member struct {
	queues map[string]bool
	seen   time.Time
	// windows: the member routes by Wake.Window (windowCap).
	windows bool
}

// newRouter returns a router for a process with client id self working
// queues, or nil when it cannot route (an id or a note that a note cannot
// carry): that process answers every wake-up.
func newRouter(wr backend.WakeRouter, self string, queues []string, logger *slog.Logger) *router {
	if self == "" || strings.Contains(self, noteSep) {
		return nil
	}
	qs := append([]string(nil), queues...)
	sort.Strings(qs)
	r := &router{wr: wr, self: self, queues: qs, logger: logger, members: map[string]*member{}, subscribed: make(chan struct{}, 1)}
	if len(r.note()) > maxNoteBytes {
		return nil
	}
	return r
}

// note is this process's member note.
func (r *router) note() string {
	return noteMember + noteSep + r.self + noteSep + strings.Join(r.queues, noteSep) + noteSep + windowCap
}

// announce sends this process's note, then again every announceEvery,
// until ctx ends; then it sends its leave.
func (r *router) announce(ctx context.Context) {
	send := func(ctx context.Context, note string) {
		sctx, cancel := context.WithTimeout(ctx, announceEvery)
		defer cancel()
		// A lost note is a hint lost: the next one follows within a second.
		_ = r.wr.Announce(sctx, note)
	}
	t := time.NewTicker(announceEvery)
	defer t.Stop()
	for {
		if !r.left.Load() && r.listening.Load() {
			send(ctx, r.note())
		}
		select {
		case <-ctx.Done():
			if !r.left.Load() {
				r.leave()
			}
			return
		case <-t.C:
		case <-r.subscribed:
		}
	}
}

// setListening records whether the listener's subscription is in place.
func (r *router) setListening(on bool) {
	r.listening.Store(on)
	if on {
		select {
		case r.subscribed <- struct{}{}:
		default:
		}
	}
}

// leave tells the other processes that this one no longer answers
// wake-ups.
func (r *router) leave() {
	r.left.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = r.wr.Announce(ctx, noteLeave+noteSep+r.self)
}

// heard records a note.
func (r *router) heard(note string, now time.Time) {
	kind, rest, _ := strings.Cut(note, noteSep)
	id, queues, _ := strings.Cut(rest, noteSep)
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case noteMember:
		m := r.members[id]
		if m == nil {
			m = &member{queues: map[string]bool{}}
			for q := range strings.SplitSeq(queues, noteSep) {
				switch {
				case q == windowCap:
					m.windows = true
				case q != "" && !strings.HasPrefix(q, ":"):
					m.queues[q] = true
				}
			}
			r.members[id] = m
		}
		m.seen = now
		if id == r.self {
			r.heardSelf = now
		}
	case noteLeave:
		if id != r.self {
			delete(r.members, id)
		}
	}
}

// answers reports whether this process answers a routed wake-up for
// queue, and how many live members work that queue (this one included).
// window, when not 0, is the wake-up's Wake.Window: it routes the wake-up
// instead of route when every member of the queue routes by windows.
func (r *router) answers(queue string, route, window uint64, now time.Time) (mine bool, members int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.heardSelf) > memberTTL {
		return true, 1 // our notes are not getting through: answer all
	}
	byWindow := window != 0
	best, bestID := uint64(0), ""
	wbest, wbestID := uint64(0), ""
	for id, m := range r.members {
		if now.Sub(m.seen) > memberTTL {
			delete(r.members, id)
			continue
		}
		if !m.queues[queue] {
			continue
		}
		members++
		if h := memberHash(route, id); bestID == "" || h > best || h == best && id > bestID {
			best, bestID = h, id
		}
		if !byWindow {
			continue
		}
		if !m.windows {
			byWindow = false
			continue
		}
		if h := memberHash(window, id); wbestID == "" || h > wbest || h == wbest && id > wbestID {
			wbest, wbestID = h, id
		}
	}
	if byWindow {
		bestID = wbestID
	}
	return bestID == r.self || bestID == "", members
}

// memberHash is the rendezvous weight of member id for a wake-up: FNV-1a
// over the id, mixed with route by splitmix64's finaliser. It has no
// per-process seed, so every process weighs every member alike.
func memberHash(route uint64, id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	x := h ^ route
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// passOn passes a routed wake-up for queue on, unless it has been passed
// on once per other member already, and reports whether it did.
func (r *router) passOn(queue string, hops int) bool {
	_, members := r.answers(queue, 0, 0, time.Now())
	if hops >= members {
		return false
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), announceEvery)
		defer cancel()
		if err := r.wr.PassOn(ctx, queue, hops); err != nil {
			r.logger.Debug("spool: passing a wake-up on failed; other processes find the jobs by polling", "queue", queue, "error", err)
		}
	}()
	return true
}
