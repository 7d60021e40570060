package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobInsertMany implements backend.Backend. In a *Tx the jobs stay invisible
// until it commits; their ids are taken at once, as a sequence's would be.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	rows := make([]*backend.JobRow, 0, len(p.Jobs))
	ids := make([]int64, len(p.Jobs))
	var dups []bool
	for i, jp := range p.Jobs {
		if jp.UniqueKey != "" {
			if h, held := s.holder(jp.UniqueKey); held {
				if dups == nil {
					dups = make([]bool, len(p.Jobs))
				}
				ids[i], dups[i] = h.ID, true
				continue
			}
		}
		s.nextID++
		r := newRow(s.nextID, jp, t)
		rows, ids[i] = append(rows, r), r.ID
		if r.UniqueKey != "" {
			s.unique[r.UniqueKey] = r
			if tx != nil {
				// An open transaction's job holds its key, as an
				// uncommitted row holds a unique index entry.
				s.inOpenTx[r] = true
			}
		}
	}
	var wakes []backend.Wake
	if tx == nil {
		for _, r := range rows {
			s.jobs[r.ID] = r
		}
		wakes = runnable(rows, t) // before unlocking: a claim may take the rows at once
	}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addInserts(rows); err != nil {
			s.mu.Lock()
			s.forgetTxRows(rows)
			s.mu.Unlock()
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
	}
	s.hub.publish(wakes)
	res := &backend.JobInsertManyResult{Count: len(rows), Duplicates: dups}
	if !p.NoIDs || backend.AnyUnique(p.Jobs) {
		res.IDs = ids
	}
	return res, nil
}

// runnable returns one wake-up per queue of rows that are due at t.
func runnable(rows []*backend.JobRow, t time.Time) []backend.Wake {
	var out []backend.Wake
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Queue] && pending(r.State) && !r.RunAt.After(t) {
			seen[r.Queue] = true
			out = append(out, backend.Wake{Queue: r.Queue})
		}
	}
	return out
}

// JobClaim implements backend.Backend.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, paused := s.paused[p.Queue]; paused {
		return nil, nil
	}
	var due []*backend.JobRow
	for _, j := range s.jobs {
		if j.Queue == p.Queue && pending(j.State) && !j.RunAt.After(t) {
			due = append(due, j)
		}
	}
	slices.SortFunc(due, backend.ClaimOrder)
	if len(due) > p.Max {
		due = due[:max(p.Max, 0)]
	}
	out := make([]*backend.JobRow, len(due))
	for i, j := range due {
		markClaimed(j, t, p.Lease, p.ClaimID)
		out[i] = copyRow(j)
	}
	return out, nil
}

// markClaimed leases j to claimID at t; s.mu is held.
func markClaimed(j *backend.JobRow, t time.Time, lease time.Duration, claimID string) {
	j.State = backend.StateRunning
	j.Attempt++
	j.Fence++
	j.LeasedUntil = timePtr(t.Add(lease))
	j.LeasedBy = claimID
	j.AttemptedAt = timePtr(t)
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	if err := b.check(); err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	s := b.s
	s.mu.Lock()
	var wakes []backend.Wake
	n := 0
	for _, j := range s.jobs {
		if j.State == backend.StateRunning && j.LeasedBy == p.ClaimID {
			j.State, j.LeasedUntil, j.LeasedBy = backend.StateAvailable, nil, ""
			j.Attempt--
			n++
			wakes = append(wakes, backend.Wake{Queue: j.Queue})
		}
	}
	s.mu.Unlock()
	s.hub.publish(wakes)
	return n, nil
}

// JobFinishMany implements backend.Backend. In a *Tx (spool.CompleteTx) the
// leases are checked now and the outcomes applied at the commit.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	var (
		applied []backend.LeaseRef
		wakes   []backend.Wake
		held    []backend.JobFinish
	)
	for _, f := range p.Finishes {
		j, ok := s.held(f.Lease)
		if !ok {
			continue
		}
		applied = append(applied, f.Lease)
		if tx != nil {
			held = append(held, f)
			continue
		}
		if w, ok := s.finish(j, f, p.DeleteCompleted, t); ok {
			wakes = append(wakes, w)
		}
	}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addFinishes(held, p.DeleteCompleted); err != nil {
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
	}
	s.hub.publish(wakes)
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(p.Finishes, applied, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}

// JobHeartbeatMany implements backend.Backend.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var alive []backend.LeaseRef
	for _, l := range p.Leases {
		if j, ok := s.held(l); ok {
			if until := t.Add(p.Lease); j.LeasedUntil == nil || until.After(*j.LeasedUntil) {
				j.LeasedUntil = timePtr(until)
			}
			alive = append(alive, l)
		}
	}
	return &backend.JobHeartbeatManyResult{Lost: backend.Unapplied(p.Leases, alive, func(l backend.LeaseRef) backend.LeaseRef { return l })}, nil
}

// JobRescue implements backend.Backend. A rescued job keeps its run_at, and
// so its place in the queue.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	var expired []*backend.JobRow
	for _, j := range s.jobs {
		if j.State == backend.StateRunning && j.LeasedUntil != nil && j.LeasedUntil.Before(t) {
			expired = append(expired, j)
		}
	}
	slices.SortFunc(expired, func(a, b *backend.JobRow) int {
		return cmp.Or(a.LeasedUntil.Compare(*b.LeasedUntil), cmp.Compare(a.ID, b.ID))
	})
	if max := p.MaxOrDefault(); len(expired) > max {
		expired = expired[:max]
	}
	res := &backend.JobRescueResult{}
	var wakes []backend.Wake
	for _, j := range expired {
		j.Errors = append(j.Errors, backend.AttemptError{Attempt: int(j.Attempt), At: t,
			Error: "lease expired: the worker " + j.LeasedBy + " stopped heartbeating (crashed, killed, paused or cut off from the database)"})
		j.LeasedUntil, j.LeasedBy = nil, ""
		if j.Attempt >= j.MaxAttempts {
			j.State, j.FinalizedAt = backend.StateDiscarded, timePtr(t)
			res.Discarded++
			continue
		}
		j.State = backend.StateRetryable
		res.Retried++
		wakes = append(wakes, backend.Wake{Queue: j.Queue})
	}
	s.mu.Unlock()
	s.hub.publish(wakes)
	return res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	b.s.pruneRates(now().Add(-time.Hour))
	if err := b.check(); err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	t := now()
	age := map[backend.State]time.Duration{
		backend.StateCompleted: p.CompletedAge,
		backend.StateDiscarded: p.DiscardedAge,
		backend.StateCancelled: p.CancelledAge,
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n, max := 0, p.MaxOrDefault()
	for id, j := range s.jobs {
		if n >= max {
			break
		}
		if a := age[j.State]; a > 0 && j.FinalizedAt != nil && j.FinalizedAt.Before(t.Add(-a)) {
			delete(s.jobs, id)
			n++
		}
	}
	return n, nil
}

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	j, ok := b.s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("get job %d: %w", id, backend.ErrNotFound)
	}
	return copyRow(j), nil
}

// JobList implements backend.Backend: jobs in id order.
func (b *Backend) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var pending []*backend.JobRow // the transaction's own inserts
	if tx != nil {
		tx.mu.Lock()
		pending = slices.Clone(tx.inserts)
		tx.mu.Unlock()
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	var out []*backend.JobRow
	for _, j := range append(slices.Collect(maps.Values(b.s.jobs)), pending...) {
		if j.ID > p.AfterID && (p.BeforeID == 0 || j.ID < p.BeforeID) &&
			(p.Queue == "" || j.Queue == p.Queue) && (p.Kind == "" || j.Kind == p.Kind) &&
			(len(p.States) == 0 || slices.Contains(p.States, j.State)) &&
			(p.CreatedAfter.IsZero() || j.CreatedAt.After(p.CreatedAfter)) &&
			(p.CreatedBefore.IsZero() || j.CreatedAt.Before(p.CreatedBefore)) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *backend.JobRow) int {
		if p.Newest {
			return cmp.Compare(b.ID, a.ID)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if limit := p.LimitOrDefault(); len(out) > limit {
		out = out[:limit]
	}
	for i, j := range out {
		out[i] = copyRow(j)
	}
	return out, nil
}

// JobRetry implements backend.Backend: a job that is not running becomes
// available now with a fresh set of attempts; its fence is kept, so old
// leases stay fenced out.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	conflict := false
	j, err := b.change(p.ID, func(j *backend.JobRow, t time.Time) bool {
		if j.State == backend.StateRunning {
			return false
		}
		if j.UniqueKey != "" && !j.UniqueStates.Has(j.State) {
			// The job takes its key back: refused while another holds it.
			if h, held := b.s.holder(j.UniqueKey); held && h != j {
				conflict = true
				return false
			}
			b.s.unique[j.UniqueKey] = j
		}
		j.State, j.Attempt, j.RunAt, j.FinalizedAt = backend.StateAvailable, 0, t, nil
		return true
	})
	if conflict {
		return nil, fmt.Errorf("retry job %d: %w", p.ID, backend.ErrUniqueConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("retry job %d: %w", p.ID, err)
	}
	b.s.hub.publish([]backend.Wake{{Queue: j.Queue}})
	return j, nil
}

// JobCancel implements backend.Backend. A running job's lease holders are
// woken with its id, so the handler stops at once.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	wasRunning := false
	j, err := b.change(p.ID, func(j *backend.JobRow, t time.Time) bool {
		if finished(j.State) {
			return false
		}
		wasRunning = j.State == backend.StateRunning
		j.State, j.FinalizedAt, j.LeasedUntil, j.LeasedBy = backend.StateCancelled, timePtr(t), nil, ""
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, err)
	}
	if wasRunning {
		b.s.hub.publish([]backend.Wake{{CancelledID: j.ID}})
	}
	return j, nil
}

// JobDelete implements backend.Backend.
func (b *Backend) JobDelete(ctx context.Context, p *backend.JobDeleteParams) (*backend.JobRow, error) {
	j, err := b.change(p.ID, func(j *backend.JobRow, t time.Time) bool {
		if j.State == backend.StateRunning {
			return false
		}
		delete(b.s.jobs, j.ID)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %d: %w", p.ID, err)
	}
	return j, nil
}

// JobThroughput implements backend.Backend.
func (b *Backend) JobThroughput(ctx context.Context, p *backend.JobThroughputParams) ([]backend.ThroughputBucket, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	since := now().Add(-p.Window)
	buckets := map[int64]*backend.ThroughputBucket{}
	b.s.mu.Lock()
	for _, j := range b.s.jobs {
		if j.FinalizedAt == nil || j.FinalizedAt.Before(since) || !finished(j.State) || (p.Queue != "" && j.Queue != p.Queue) {
			continue
		}
		start := j.FinalizedAt.Unix() / p.BucketSeconds() * p.BucketSeconds()
		bk := buckets[start]
		if bk == nil {
			bk = &backend.ThroughputBucket{Start: time.Unix(start, 0).UTC()}
			buckets[start] = bk
		}
		switch j.State {
		case backend.StateCompleted:
			bk.Completed++
		case backend.StateDiscarded:
			bk.Discarded++
		case backend.StateCancelled:
			bk.Cancelled++
		}
	}
	b.s.mu.Unlock()
	out := make([]backend.ThroughputBucket, 0, len(buckets))
	for _, bk := range buckets {
		out = append(out, *bk)
	}
	slices.SortFunc(out, func(a, b backend.ThroughputBucket) int { return a.Start.Compare(b.Start) })
	return out, nil
}

// change applies fn to job id; fn reports whether the change applies to the
// job's state (backend.ErrInvalidState otherwise).
func (b *Backend) change(id int64, fn func(j *backend.JobRow, t time.Time) bool) (*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	j, ok := b.s.jobs[id]
	if !ok {
		return nil, backend.ErrNotFound
	}
	if !fn(j, now()) {
		return nil, backend.ErrInvalidState
	}
	return copyRow(j), nil
}

// QueueStatsAll implements backend.Backend: counts by queue and state, in
// queue order.
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	b.s.mu.Lock()
	byQueue := map[string]map[backend.State]int64{}
	for _, j := range b.s.jobs {
		if byQueue[j.Queue] == nil {
			byQueue[j.Queue] = map[backend.State]int64{}
		}
		byQueue[j.Queue][j.State]++
	}
	b.s.mu.Unlock()
	out := make([]backend.QueueStats, 0, len(byQueue))
	for q, counts := range byQueue {
		out = append(out, backend.QueueStats{Queue: q, Counts: counts})
	}
	slices.SortFunc(out, func(a, b backend.QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}

// QueuePause implements backend.Backend.
func (b *Backend) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("%s queue %q: %w", p.Op(), p.Queue, err)
	}
	b.s.mu.Lock()
	_, was := b.s.paused[p.Queue]
	switch {
	case p.Paused && !was:
		b.s.paused[p.Queue] = now()
	case !p.Paused:
		delete(b.s.paused, p.Queue)
	}
	b.s.mu.Unlock()
	if !p.Paused && was {
		b.s.hub.publish([]backend.Wake{{Queue: p.Queue}})
	}
	return nil
}

// QueuePausedAll implements backend.Backend.
func (b *Backend) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	b.s.mu.Lock()
	out := make([]backend.PausedQueue, 0, len(b.s.paused))
	for q, since := range b.s.paused {
		out = append(out, backend.PausedQueue{Queue: q, Since: since})
	}
	b.s.mu.Unlock()
	slices.SortFunc(out, func(a, b backend.PausedQueue) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}

// LeaderElect implements backend.Backend: ClientID leads Name if it led it
// already or the last term has expired.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	if err := b.check(); err != nil {
		return false, fmt.Errorf("elect leader %q: %w", p.Name, err)
	}
	t := now()
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	l, ok := b.s.leaders[p.Name]
	if ok && l.id != p.ClientID && !l.expires.Before(t) {
		return false, nil
	}
	b.s.leaders[p.Name] = leader{id: p.ClientID, expires: t.Add(p.TTL)}
	return true, nil
}

// LeaderResign implements backend.Backend.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("resign leader %q: %w", p.Name, err)
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if l, ok := b.s.leaders[p.Name]; ok && l.id == p.ClientID {
		delete(b.s.leaders, p.Name)
	}
	return nil
}

// JobBulk implements backend.Backend.
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	var taken []*backend.JobRow
	for _, j := range s.jobs {
		if p.Selects(j) {
			taken = append(taken, j)
		}
	}
	slices.SortFunc(taken, func(a, b *backend.JobRow) int { return cmp.Compare(a.ID, b.ID) })
	taken = taken[:min(len(taken), p.MaxOrDefault())]
	res := &backend.JobBulkResult{Taken: len(taken)}
	var wakes []backend.Wake
	for _, j := range taken {
		res.LastID = j.ID
		switch p.Action {
		case backend.BulkRetry:
			if backend.NeedsKeyBack(j) {
				res.UniqueRetries = append(res.UniqueRetries, j.ID)
				continue
			}
			j.State, j.Attempt, j.RunAt, j.FinalizedAt = backend.StateAvailable, 0, t, nil
			wakes = append(wakes, backend.Wake{Queue: j.Queue})
		case backend.BulkCancel:
			if j.State == backend.StateRunning {
				wakes = append(wakes, backend.Wake{CancelledID: j.ID})
			}
			j.State, j.FinalizedAt, j.LeasedUntil, j.LeasedBy = backend.StateCancelled, timePtr(t), nil, ""
		case backend.BulkDelete:
			delete(s.jobs, j.ID)
		}
		res.Changed++
	}
	s.mu.Unlock()
	s.hub.publish(wakes)
	return res, nil
}

// JobRecord implements backend.Backend.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	if err := b.check(); err != nil {
		return false, fmt.Errorf("record job %d: %w", p.Lease.ID, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.held(p.Lease)
	if !ok {
		return false, nil
	}
	if p.Output != nil {
		j.Output = slices.Clone(p.Output)
	}
	if p.Metadata != nil {
		j.Metadata = slices.Clone(p.Metadata)
	}
	return true, nil
}
