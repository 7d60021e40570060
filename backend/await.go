package backend

import (
	"context"
	"time"
)

// Awaits is the part of Backend for debounced inserts and for reading the
// jobs that finished, which Client.Await and Client.SubscribeAll use.
type Awaits interface {
	// JobInsertDebounced inserts one job under a debounced key, or moves
	// the run time of the key's pending job (see JobDebounceParams). All
	// inserts of one key, from any process, are serialised by the store,
	// so a key never gets a second pending job from an insert.
	JobInsertDebounced(ctx context.Context, p *JobDebounceParams) (*JobDebounceResult, error)
	// JobFinishedSince lists jobs that finished (their FinalizedAt) after
	// Since, or at Since with an id above AfterID, oldest first (by
	// FinalizedAt, then id), at most Limit: the last job listed is the
	// next call's Since and AfterID (one finish batch stamps many jobs
	// with one time).
	// Jobs deleted when they completed (DeleteCompleted) are not listed.
	JobFinishedSince(ctx context.Context, p *JobFinishedSinceParams) ([]*FinishedJob, error)
}

// JobDebounceParams inserts Job under the debounced key Key. A key has a
// current job, the last one an insert of the key made. While that job is
// pending (available, scheduled or retryable), an insert makes no job: it
// moves the job's run time to the store's now plus Window, never earlier
// than it was and never later than the job's creation plus MaxWait (when
// MaxWait is not zero), and replaces its args with Job.Args when
// ReplaceArgs is set. Otherwise (no job yet, or it is running, finished
// or gone) the insert makes a new job that runs after Window (or MaxWait,
// if that is shorter) and becomes the key's current job: a job already
// running does not absorb inserts that come after its start.
type JobDebounceParams struct {
	Tx          Tx // nil: the backend's own connection
	Job         *JobInsertParams
	Key         string // at most UniqueKeyMaxLen bytes of printable ASCII
	Window      time.Duration
	MaxWait     time.Duration // 0: no maximum
	ReplaceArgs bool
}

// JobDebounceResult is the key's pending job after the insert, and whether
// the insert moved an existing job (Debounced) rather than make one.
type JobDebounceResult struct {
	ID        int64
	Debounced bool
}

// DebounceRunAt is the run time a debounced insert at now gives the pending
// job of its key: now plus window, never earlier than runAt (the job's run
// time so far) and never later than created plus maxWait (maxWait 0: no
// bound). Backends that compute it in Go use this; SQL ones say the same.
func DebounceRunAt(now, runAt, created time.Time, window, maxWait time.Duration) time.Time {
	at := now.Add(window)
	if maxWait > 0 && at.After(created.Add(maxWait)) {
		at = created.Add(maxWait)
	}
	if runAt.After(at) {
		at = runAt
	}
	return at
}

// DebounceFirstDelay is the delay of a debounced key's new job.
func DebounceFirstDelay(window, maxWait time.Duration) time.Duration {
	if maxWait > 0 && maxWait < window {
		return maxWait
	}
	return window
}

// JobFinishedSinceParams asks for the jobs finished after (Since,
// AfterID), in (FinalizedAt, id) order.
type JobFinishedSinceParams struct {
	Since   time.Time
	AfterID int64
	Limit   int // 0: DefaultListLimit
}

// After reports whether a job that finished at t with id comes after p's
// (Since, AfterID), for stores that filter in Go.
func (p *JobFinishedSinceParams) After(t time.Time, id int64) bool {
	return t.After(p.Since) || (t.Equal(p.Since) && id > p.AfterID)
}

// FinishedJob is one finished job as JobFinishedSince lists it.
type FinishedJob struct {
	ID          int64     `json:"id"`
	Queue       string    `json:"queue"`
	Kind        string    `json:"kind"`
	State       State     `json:"state"`
	FinalizedAt time.Time `json:"finalized_at"`
}

// FinishNotifier is an optional capability of a store that tells a client
// soon after jobs finished in any process, so that Client.Await and
// Client.SubscribeAll need not wait for their next read.
type FinishNotifier interface {
	// ListenFinished blocks, calling onFinish for every notification,
	// until ctx ends or the store fails; the error says why it stopped. It
	// calls ready once the subscription is in place. onFinish gets the ids
	// of jobs that finished, or nil when the store only knows that
	// something changed (read JobFinishedSince to learn what). Hints only:
	// a missed one delays a waiter until its next read.
	ListenFinished(ctx context.Context, ready func(), onFinish func(ids []int64)) error
}

// FinishAnnouncer is an optional capability of a store whose
// ListenFinished hears finishes only when the finishing client announces
// them (PostgreSQL's NOTIFY): a client with Config.AnnounceFinishes calls
// AnnounceFinished with the ids of the jobs its outcomes finished, in
// batches, after they were applied.
type FinishAnnouncer interface {
	AnnounceFinished(ctx context.Context, ids []int64) error
}
