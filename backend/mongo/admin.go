package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	d, err := b.getDoc(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return d.row(), nil
}

func (b *Backend) getDoc(ctx context.Context, id int64) (*jobDoc, error) {
	var d jobDoc
	err := b.jobs.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if notFound(err) {
		return nil, backend.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// JobList implements backend.Backend: jobs in id order.
func (b *Backend) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	if err := noTx(p.Tx); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	filter := bson.D{}
	ids := bson.D{{Key: "$gt", Value: p.AfterID}}
	if p.BeforeID != 0 {
		ids = append(ids, bson.E{Key: "$lt", Value: p.BeforeID})
	}
	filter = append(filter, bson.E{Key: "_id", Value: ids})
	if p.Queue != "" {
		filter = append(filter, bson.E{Key: "queue", Value: p.Queue})
	}
	if p.Kind != "" {
		filter = append(filter, bson.E{Key: "kind", Value: p.Kind})
	}
	if len(p.States) > 0 {
		filter = append(filter, bson.E{Key: "state", Value: bson.D{{Key: "$in", Value: stateList(p.States)}}})
	}
	if created := createdRange(p.CreatedAfter, p.CreatedBefore); created != nil {
		filter = append(filter, bson.E{Key: "created_at", Value: created})
	}
	dir := 1
	if p.Newest {
		dir = -1
	}
	docs, err := b.findDocs(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: dir}}).SetLimit(int64(p.LimitOrDefault())))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return rows(docs), nil
}

func rows(docs []*jobDoc) []*backend.JobRow {
	out := make([]*backend.JobRow, len(docs))
	for i, d := range docs {
		out[i] = d.row()
	}
	return out
}

func stateList(states []backend.State) bson.A {
	out := make(bson.A, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// createdRange bounds created_at (exclusive), nil for no bound.
func createdRange(after, before time.Time) bson.D {
	var r bson.D
	if !after.IsZero() {
		r = append(r, bson.E{Key: "$gt", Value: micros(after)})
	}
	if !before.IsZero() {
		r = append(r, bson.E{Key: "$lt", Value: micros(before)})
	}
	return r
}

// errNoChange, from a transition function, means the transition does not
// apply to the job's state.
var errNoChange = backend.ErrInvalidState

// transition applies fn's change to job id, computed from the job as read
// and written only if its state and fence are still as read (else read
// again): the compare-and-set every admin transition goes through.
func (b *Backend) transition(ctx context.Context, id int64, fn func(d *jobDoc, t time.Time) (*change, error)) (*jobDoc, error) {
	for {
		d, err := b.getDoc(ctx, id)
		if err != nil {
			return nil, err
		}
		t, err := b.now(ctx)
		if err != nil {
			return nil, err
		}
		c, err := fn(d, t)
		if err != nil {
			return nil, err
		}
		filter := bson.D{{Key: "_id", Value: id}, {Key: "state", Value: d.State}, {Key: "fence", Value: d.Fence}}
		if c == nil { // delete
			r, err := b.jobs.DeleteOne(ctx, filter)
			if err != nil {
				return nil, err
			}
			if r.DeletedCount > 0 {
				return d, nil
			}
			continue
		}
		// The document as this update left it, not as a later read finds
		// it: a claim may take a job made available before the read.
		var after jobDoc
		err = b.jobs.FindOneAndUpdate(ctx, filter, c.update(),
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after)
		if err == nil {
			return &after, nil
		}
		if !notFound(err) {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// retryChange makes d available now with a fresh set of attempts; its
// fence is kept, so old leases stay fenced out.
func retryChange(d *jobDoc, t time.Time) (*change, error) {
	s := backend.State(d.State)
	if s == backend.StateRunning || s == backend.StateWaiting {
		return nil, errNoChange
	}
	c := newChange()
	c.state(d, backend.StateAvailable, t)
	c.set["attempt"] = int32(0)
	c.set["run_at"] = micros(t)
	return c, nil
}

// JobRetry implements backend.Backend.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	d, err := b.transition(ctx, p.ID, retryChange)
	if duplicateKey(err) {
		err = backend.ErrUniqueConflict
	}
	if err != nil {
		return nil, fmt.Errorf("retry job %d: %w", p.ID, err)
	}
	return d.row(), nil
}

func cancelChange(d *jobDoc, t time.Time) (*change, error) {
	if backend.State(d.State).IsFinal() {
		return nil, errNoChange
	}
	c := newChange()
	c.state(d, backend.StateCancelled, t)
	return c, nil
}

// JobCancel implements backend.Backend. A running job's holder learns of
// it at its next heartbeat.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	d, err := b.transition(ctx, p.ID, cancelChange)
	if err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, err)
	}
	return d.row(), nil
}

func deleteChange(d *jobDoc, _ time.Time) (*change, error) {
	if s := backend.State(d.State); s == backend.StateRunning || s == backend.StateWaiting {
		return nil, errNoChange
	}
	return nil, nil
}

// JobDelete implements backend.Backend.
func (b *Backend) JobDelete(ctx context.Context, p *backend.JobDeleteParams) (*backend.JobRow, error) {
	d, err := b.transition(ctx, p.ID, deleteChange)
	if err != nil {
		return nil, fmt.Errorf("delete job %d: %w", p.ID, err)
	}
	return d.row(), nil
}

// JobThroughput implements backend.Backend: the finished jobs of the
// window, read through the index of finish times and counted here (the
// embedded engine has no aggregation pipeline).
func (b *Backend) JobThroughput(ctx context.Context, p *backend.JobThroughputParams) ([]backend.ThroughputBucket, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	t, err := b.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	filter := bson.D{{Key: "finalized_at", Value: bson.D{{Key: "$gte", Value: micros(t.Add(-p.Window))}}}}
	if p.Queue != "" {
		filter = append(filter, bson.E{Key: "queue", Value: p.Queue})
	}
	cur, err := b.jobs.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "state", Value: 1}, {Key: "finalized_at", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	var docs []struct {
		State       string `bson:"state"`
		FinalizedAt int64  `bson:"finalized_at"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	buckets := backend.Throughput{}
	for _, d := range docs {
		buckets.Add(fromMicros(d.FinalizedAt), backend.State(d.State), p.BucketSeconds())
	}
	return buckets.Sorted(), nil
}

// QueueStatsAll implements backend.Backend: counts by queue and state, in
// queue order, counted here from a projection (no aggregation pipeline on
// the embedded engine).
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	cur, err := b.jobs.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "queue", Value: 1}, {Key: "state", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	var docs []struct {
		Queue string `bson:"queue"`
		State string `bson:"state"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	counts := backend.QueueCounts{}
	for _, d := range docs {
		counts.Add(d.Queue, backend.State(d.State), 1)
	}
	return counts.Sorted(), nil
}

// QueuePause implements backend.Backend: a paused queue is a document in
// spool_queues, which every claim reads first.
func (b *Backend) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	queues := b.db.Collection(queuesColl)
	var err error
	if p.Paused {
		var t time.Time
		if t, err = b.now(ctx); err == nil {
			_, err = queues.UpdateOne(ctx, bson.D{{Key: "_id", Value: p.Queue}},
				bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "since", Value: micros(t)}}}}, options.Update().SetUpsert(true))
		}
	} else {
		_, err = queues.DeleteOne(ctx, bson.D{{Key: "_id", Value: p.Queue}})
	}
	if err != nil {
		return fmt.Errorf("%s queue %q: %w", p.Op(), p.Queue, err)
	}
	return nil
}

// paused reports whether queue is paused.
func (b *Backend) paused(ctx context.Context, queue string) (bool, error) {
	n, err := b.db.Collection(queuesColl).CountDocuments(ctx, bson.D{{Key: "_id", Value: queue}})
	if err != nil {
		return false, fmt.Errorf("read queue pause: %w", err)
	}
	return n > 0, nil
}

// QueuePausedAll implements backend.Backend.
func (b *Backend) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	cur, err := b.db.Collection(queuesColl).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	var docs []struct {
		Queue string `bson:"_id"`
		Since int64  `bson:"since"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	out := make([]backend.PausedQueue, len(docs))
	for i, d := range docs {
		out[i] = backend.PausedQueue{Queue: d.Queue, Since: fromMicros(d.Since)}
	}
	return out, nil
}

// periodicDoc is a recorded periodic job; times in microseconds, 0 for
// the zero time. Rev grows with every write (compare-and-set).
type periodicDoc struct {
	Name      string `bson:"_id"`
	Schedule  string `bson:"schedule"`
	Queue     string `bson:"queue"`
	Since     int64  `bson:"since"`
	LastSlot  int64  `bson:"last_slot"`
	NextSlot  int64  `bson:"next_slot"`
	StartedAt int64  `bson:"started_at"`
	SeenAt    int64  `bson:"seen_at"`
	Rev       int64  `bson:"rev"`
}

func optMicros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return micros(t)
}

func optTime(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return fromMicros(us)
}

func (d *periodicDoc) job() backend.PeriodicJob {
	return backend.PeriodicJob{Name: d.Name, Schedule: d.Schedule, Queue: d.Queue, Since: optTime(d.Since),
		LastSlot: optTime(d.LastSlot), NextSlot: optTime(d.NextSlot), StartedAt: optTime(d.StartedAt), SeenAt: optTime(d.SeenAt)}
}

// PeriodicRecord implements backend.Backend: each job is read, merged
// here and written back only if no other leader wrote it meanwhile (its
// rev), else read again.
func (b *Backend) PeriodicRecord(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
	coll := b.db.Collection(periodicColl)
	out := make([]backend.PeriodicJob, 0, len(p.Jobs))
	for _, j := range p.Jobs {
		for {
			t, err := b.now(ctx)
			if err != nil {
				return nil, fmt.Errorf("record periodic jobs: %w", err)
			}
			var d periodicDoc
			err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: j.Name}}).Decode(&d)
			if notFound(err) {
				d = periodicDoc{Name: j.Name, Schedule: j.Schedule, Queue: j.Queue, Since: optMicros(j.Since),
					LastSlot: optMicros(j.LastSlot), NextSlot: optMicros(j.NextSlot), StartedAt: optMicros(j.StartedAt), SeenAt: micros(t)}
				if _, err = coll.InsertOne(ctx, &d); duplicateKey(err) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("record periodic jobs: %w", err)
				}
				out = append(out, d.job())
				break
			}
			if err != nil {
				return nil, fmt.Errorf("record periodic jobs: %w", err)
			}
			rev := d.Rev
			d.Schedule, d.Queue, d.NextSlot = j.Schedule, j.Queue, optMicros(j.NextSlot)
			if last := optMicros(j.LastSlot); last > d.LastSlot {
				d.LastSlot = last
			}
			if !j.StartedAt.IsZero() && (d.StartedAt == 0 || optTime(d.StartedAt).Before(p.StartAfter)) {
				d.StartedAt = micros(j.StartedAt)
			}
			d.SeenAt, d.Rev = micros(t), rev+1
			r, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: j.Name}, {Key: "rev", Value: rev}}, &d)
			if err != nil {
				return nil, fmt.Errorf("record periodic jobs: %w", err)
			}
			if r.MatchedCount > 0 {
				out = append(out, d.job())
				break
			}
		}
	}
	return out, nil
}

// PeriodicList implements backend.Backend.
func (b *Backend) PeriodicList(ctx context.Context) ([]backend.PeriodicJob, error) {
	cur, err := b.db.Collection(periodicColl).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	var docs []periodicDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	out := make([]backend.PeriodicJob, len(docs))
	for i := range docs {
		out[i] = docs[i].job()
	}
	return out, nil
}
