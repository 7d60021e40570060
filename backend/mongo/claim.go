package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// claimSort is the claim order, served by the "claim" index.
var claimSort = bson.D{{Key: "priority", Value: 1}, {Key: "run_at", Value: 1}, {Key: "_id", Value: 1}}

// JobClaim implements backend.Backend: one findAndModify per job, each
// taking the first due pending job of the queue in claim order and making
// it running under a new fence, atomically on the server, so no two
// claims take one job. A pause is read just before: a claim already past
// that read when the pause is written may still take jobs.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	r, err := b.jobClaim(ctx, p)
	return r, ctxError(ctx, err)
}

func (b *Backend) jobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	paused, err := b.paused(ctx, p.Queue)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	if paused || p.Max <= 0 {
		return nil, nil
	}
	t, err := b.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	filter := bson.D{
		{Key: "queue", Value: p.Queue},
		{Key: "state", Value: bson.D{{Key: "$in", Value: pendingStates()}}},
		{Key: "run_at", Value: bson.D{{Key: "$lte", Value: micros(t)}}},
	}
	update := bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "state", Value: string(backend.StateRunning)},
			{Key: "leased_until", Value: micros(t.Add(p.Lease))},
			{Key: "leased_by", Value: p.ClaimID},
			{Key: "attempted_at", Value: micros(t)},
		}},
		{Key: "$inc", Value: bson.D{{Key: "attempt", Value: 1}, {Key: "fence", Value: 1}}},
	}
	opts := options.FindOneAndUpdate().SetSort(claimSort).SetReturnDocument(options.After)
	// One findAndModify a job: a claim stops short of Max once a quarter
	// of the lease has gone on it, so that its first jobs still start well
	// inside their lease (the engine releases the jobs of a claim whose
	// reply came after half of it); the engine claims again when it has
	// room.
	began := time.Now()
	var out []*backend.JobRow
	for len(out) < p.Max && (len(out) == 0 || time.Since(began) < p.Lease/4) {
		var d jobDoc
		err := b.jobs.FindOneAndUpdate(ctx, filter, update, opts).Decode(&d)
		if notFound(err) {
			break
		}
		if err != nil {
			if len(out) > 0 {
				// The jobs taken so far are running under this claim id;
				// the caller releases them (JobReleaseClaim) as a claim
				// whose reply was lost.
				return nil, fmt.Errorf("claim jobs: %w: %w", backend.ErrOutcomeUnknown, err)
			}
			return nil, fmt.Errorf("claim jobs: %w", err)
		}
		out = append(out, d.row())
	}
	return out, nil
}

// held is the filter of a write about a claimed job: it applies only
// while the job runs under that fence.
func held(l backend.LeaseRef) bson.D {
	return bson.D{{Key: "_id", Value: l.ID}, {Key: "fence", Value: l.Fence}, {Key: "state", Value: string(backend.StateRunning)}}
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	r, err := b.jobReleaseClaim(ctx, p)
	return r, ctxError(ctx, err)
}

func (b *Backend) jobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	docs, err := b.findDocs(ctx, bson.D{{Key: "leased_by", Value: p.ClaimID}, {Key: "state", Value: string(backend.StateRunning)}}, nil)
	if err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	t, err := b.now(ctx)
	if err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	n := 0
	for _, d := range docs {
		c, _ := finish(d, backend.JobFinish{Outcome: backend.OutcomeRelease}, false, t)
		ok, err := b.apply(ctx, held(backend.LeaseRef{ID: d.ID, Fence: d.Fence}), c)
		if err != nil {
			return n, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// apply writes c to the job filter selects and reports whether it matched.
func (b *Backend) apply(ctx context.Context, filter bson.D, c *change) (bool, error) {
	r, err := b.jobs.UpdateOne(ctx, filter, c.update())
	if err != nil {
		return false, err
	}
	return r.MatchedCount > 0, nil
}

// findDocs reads the jobs filter selects, in opts' order.
func (b *Backend) findDocs(ctx context.Context, filter bson.D, opts *options.FindOptions) ([]*jobDoc, error) {
	if opts == nil {
		opts = options.Find()
	}
	cur, err := b.jobs.Find(ctx, filter, opts)
	if err != nil {
		return nil, err
	}
	var docs []*jobDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	return docs, nil
}

// JobFinishMany implements backend.Backend. Each outcome is computed from
// the job as read, then all are written in one unordered bulk write, each
// update (or delete) filtered on the job's _id, fence and running state: a
// job rescued, re-claimed or cancelled meanwhile no longer matches, and
// its outcome is reported rejected. An applied outcome stamps done_fence
// with its fence (a deleted job is gone), which tells, when the bulk write
// matched fewer than it sent, which ones applied.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	r, err := b.jobFinishMany(ctx, p)
	return r, ctxError(ctx, err)
}

func (b *Backend) jobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	if err := noTx(p.Tx); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(p.Finishes) == 0 {
		return &backend.JobFinishManyResult{}, nil
	}
	byID, err := docsByID(b, ctx, p.Finishes, func(f backend.JobFinish) int64 { return f.Lease.ID }, string(backend.StateRunning))
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	t, err := b.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	var (
		models []mongo.WriteModel
		sent   []backend.JobFinish
		dels   = map[backend.LeaseRef]bool{}
	)
	for _, f := range p.Finishes {
		d, ok := byID[f.Lease.ID]
		if !ok || d.Fence != f.Lease.Fence {
			continue
		}
		delete(byID, f.Lease.ID) // one outcome per claim
		c, del := finish(d, f, p.DeleteCompleted, t)
		if del {
			models = append(models, mongo.NewDeleteOneModel().SetFilter(held(f.Lease)))
			dels[f.Lease] = true
		} else {
			c.set["done_fence"] = f.Lease.Fence
			models = append(models, mongo.NewUpdateOneModel().SetFilter(held(f.Lease)).SetUpdate(c.update()))
		}
		sent = append(sent, f)
	}
	var applied []backend.LeaseRef
	if len(models) > 0 {
		r, err := b.jobs.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if err != nil {
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
		if int(r.MatchedCount+r.DeletedCount) == len(models) {
			for _, f := range sent {
				applied = append(applied, f.Lease)
			}
		} else {
			after, err := docsByID(b, ctx, sent, func(f backend.JobFinish) int64 { return f.Lease.ID }, "")
			if err != nil {
				return nil, fmt.Errorf("finish jobs: %w: %w", backend.ErrOutcomeUnknown, err)
			}
			for _, f := range sent {
				d, ok := after[f.Lease.ID]
				if (dels[f.Lease] && !ok) || (ok && d.DoneFence == f.Lease.Fence && d.State != string(backend.StateRunning)) {
					applied = append(applied, f.Lease)
				}
			}
		}
	}
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(p.Finishes, applied, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}

// docsByID reads the jobs of items by id (in state, when not empty).
func docsByID[T any](b *Backend, ctx context.Context, items []T, id func(T) int64, state string) (map[int64]*jobDoc, error) {
	ids := make(bson.A, len(items))
	for i, it := range items {
		ids[i] = id(it)
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
	if state != "" {
		filter = append(filter, bson.E{Key: "state", Value: state})
	}
	docs, err := b.findDocs(ctx, filter, nil)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*jobDoc, len(docs))
	for _, d := range docs {
		byID[d.ID] = d
	}
	return byID, nil
}

// JobHeartbeatMany implements backend.Backend, in one bulk write: $max
// never shortens a lease. When it matched fewer than it sent, the jobs
// are read again, and a lease whose job no longer runs under its fence is
// lost.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	r, err := b.jobHeartbeatMany(ctx, p)
	return r, ctxError(ctx, err)
}

func (b *Backend) jobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if len(p.Leases) == 0 {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	t, err := b.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	until := micros(t.Add(p.Lease))
	models := make([]mongo.WriteModel, len(p.Leases))
	for i, l := range p.Leases {
		models[i] = mongo.NewUpdateOneModel().SetFilter(held(l)).SetUpdate(bson.D{{Key: "$max", Value: bson.D{{Key: "leased_until", Value: until}}}})
	}
	r, err := b.jobs.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if int(r.MatchedCount) == len(models) {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	after, err := docsByID(b, ctx, p.Leases, func(l backend.LeaseRef) int64 { return l.ID }, string(backend.StateRunning))
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	var lost []backend.LeaseRef
	for _, l := range p.Leases {
		if d, ok := after[l.ID]; !ok || d.Fence != l.Fence {
			lost = append(lost, l)
		}
	}
	return &backend.JobHeartbeatManyResult{Lost: lost}, nil
}

// JobRecord implements backend.Backend.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	set := bson.D{}
	if p.Output != nil {
		set = append(set, bson.E{Key: "output", Value: string(p.Output)})
	}
	if p.Metadata != nil {
		set = append(set, bson.E{Key: "metadata", Value: string(p.Metadata)})
	}
	if len(set) == 0 {
		n, err := b.jobs.CountDocuments(ctx, held(p.Lease))
		if err != nil {
			return false, fmt.Errorf("record job %d: %w", p.Lease.ID, err)
		}
		return n > 0, nil
	}
	r, err := b.jobs.UpdateOne(ctx, held(p.Lease), bson.D{{Key: "$set", Value: set}})
	if err != nil {
		return false, fmt.Errorf("record job %d: %w", p.Lease.ID, err)
	}
	return r.MatchedCount > 0, nil
}
