package postgres

import (
	"sync"

	"github.com/spoolq/spool/backend"
)

// smallClaimMax is the size below which a queue's last claim makes its next
// one small (claim_small.sql: its jobs stay in spool_jobs). A lease row
// saves a batch about 6 µs of server time a job (the drain, at about 1,000
// jobs a claim), and costs a claim and its finish about 300 µs more than
// the small form: lease rows pay from about 50 jobs a claim.
const smallClaimMax = 32

// placedMax bounds the jobs placedJobs remembers. A job is forgotten when
// its outcome is written; past the bound (outcomes given up on) the memory
// starts over, which only sends some finishes the longer way.
const placedMax = 1 << 16

// placedJobs remembers, by id and fence, the running jobs this backend
// claimed in place, so that their finishes and heartbeats go to the
// in-place statements without first trying the leased ones, which would
// find nothing at the cost of a statement. A job it does not know takes
// the leased statement first, as any job may.
type placedJobs struct {
	mu   sync.Mutex
	jobs map[int64]int32
}

// add remembers the jobs of an in-place claim.
func (p *placedJobs) add(rows []*backend.JobRow) {
	if len(rows) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.jobs == nil || len(p.jobs)+len(rows) > placedMax {
		p.jobs = make(map[int64]int32, len(rows))
	}
	for _, r := range rows {
		p.jobs[r.ID] = r.Fence
	}
}

// empty reports whether p remembers no job.
func (p *placedJobs) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.jobs) == 0
}

// addDependents remembers the jobs of a claim that have dependents (a
// workflow's parents, a batch's members), whose finishes go straight to
// finishDependents.
func (p *placedJobs) addDependents(rows []*backend.JobRow) {
	var with []*backend.JobRow
	for _, r := range rows {
		if r.HasDependents {
			with = append(with, r)
		}
	}
	p.add(with)
}

// split returns the indexes of the (ids[i], fences[i]) claimed in place,
// and of the others, each in the order of ids.
func (p *placedJobs) split(ids []int64, fences []int32) (placed, other []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, id := range ids {
		if f, ok := p.jobs[id]; ok && f == fences[i] {
			placed = append(placed, i)
		} else {
			other = append(other, i)
		}
	}
	return placed, other
}

// forget drops the jobs whose outcome was written or refused.
func (p *placedJobs) forget(ids []int64, fences []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.jobs) == 0 {
		return
	}
	for i, id := range ids {
		if f, ok := p.jobs[id]; ok && f == fences[i] {
			delete(p.jobs, id)
		}
	}
}
