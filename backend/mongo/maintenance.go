package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// JobRescue implements backend.Backend. Each expired job is written with a
// filter that repeats the expiry, so a heartbeat that lands between the
// read and the write keeps its job. A rescued job keeps its run_at, and so
// its place in the queue.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	t, err := b.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	expired := bson.D{{Key: "state", Value: string(backend.StateRunning)}, {Key: "leased_until", Value: bson.D{{Key: "$lt", Value: micros(t)}}}}
	docs, err := b.findDocs(ctx, expired, options.Find().
		SetSort(bson.D{{Key: "leased_until", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(p.MaxOrDefault())))
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	res := &backend.JobRescueResult{}
	for _, d := range docs {
		c := newChange()
		c.push = &errDoc{Attempt: d.Attempt, At: micros(t),
			Error: "lease expired: the worker " + d.LeasedBy + " stopped heartbeating (crashed, killed, paused or cut off from the database)"}
		discard := d.Attempt >= d.MaxAttempts
		if discard {
			c.state(d, backend.StateDiscarded, t)
		} else {
			c.state(d, backend.StateRetryable, t)
		}
		filter := append(held(backend.LeaseRef{ID: d.ID, Fence: d.Fence}), bson.E{Key: "leased_until", Value: bson.D{{Key: "$lt", Value: micros(t)}}})
		ok, err := b.apply(ctx, filter, c)
		if err != nil {
			return res, fmt.Errorf("rescue jobs: %w", err)
		}
		switch {
		case !ok:
		case discard:
			res.Discarded++
		default:
			res.Retried++
		}
	}
	return res, nil
}

// JobCleanup implements backend.Backend: finished jobs older than their
// state's retention are deleted, through the index of finish times.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	t, err := b.now(ctx)
	if err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	var or bson.A
	for s, age := range map[backend.State]time.Duration{
		backend.StateCompleted: p.CompletedAge,
		backend.StateDiscarded: p.DiscardedAge,
		backend.StateCancelled: p.CancelledAge,
	} {
		if age > 0 {
			or = append(or, bson.D{{Key: "state", Value: string(s)}, {Key: "finalized_at", Value: bson.D{{Key: "$lt", Value: micros(t.Add(-age))}}}})
		}
	}
	if len(or) == 0 {
		return 0, nil
	}
	cur, err := b.jobs.Find(ctx, bson.D{{Key: "$or", Value: or}}, options.Find().
		SetProjection(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(p.MaxOrDefault())))
	if err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	var ids []struct {
		ID int64 `bson:"_id"`
	}
	if err := cur.All(ctx, &ids); err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	in := make(bson.A, len(ids))
	for i, id := range ids {
		in[i] = id.ID
	}
	// The age filter again: a job retried meanwhile is not finished.
	r, err := b.jobs.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}, {Key: "$or", Value: or}})
	if err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	return int(r.DeletedCount), nil
}

// LeaderElect implements backend.Backend: ClientID leads Name if it led it
// already or the last term has ended by the server's clock. A term is a
// document per name; the upsert of a name whose term another holds meets
// its _id and fails, so one client leads.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	t, err := b.now(ctx)
	if err != nil {
		return false, fmt.Errorf("elect leader %q: %w", p.Name, err)
	}
	filter := bson.D{{Key: "_id", Value: p.Name}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "holder", Value: p.ClientID}},
		bson.D{{Key: "until", Value: bson.D{{Key: "$lt", Value: micros(t)}}}},
	}}}
	_, err = b.db.Collection(leadersColl).UpdateOne(ctx, filter,
		bson.D{{Key: "$set", Value: bson.D{{Key: "holder", Value: p.ClientID}, {Key: "until", Value: micros(t.Add(p.TTL))}}}},
		options.Update().SetUpsert(true))
	if duplicateKey(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("elect leader %q: %w", p.Name, err)
	}
	return true, nil
}

// LeaderResign implements backend.Backend.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	_, err := b.db.Collection(leadersColl).DeleteOne(ctx, bson.D{{Key: "_id", Value: p.Name}, {Key: "holder", Value: p.ClientID}})
	if err != nil {
		return fmt.Errorf("resign leader %q: %w", p.Name, err)
	}
	return nil
}
