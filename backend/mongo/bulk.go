package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// JobBulk implements backend.Backend: the batch's jobs are read in id
// order, then each is changed by a write filtered on its state and fence
// as read, so a job that moved meanwhile is taken but left alone. The
// batch is not one transaction: a failure part way leaves the jobs before
// it changed, which a repeated call (each action is idempotent) finishes.
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	states := p.StatesTaken()
	if len(states) == 0 {
		return &backend.JobBulkResult{}, nil
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.AfterID}}}, {Key: "state", Value: bson.D{{Key: "$in", Value: stateList(states)}}}}
	if p.Queue != "" {
		filter = append(filter, bson.E{Key: "queue", Value: p.Queue})
	}
	if p.Kind != "" {
		filter = append(filter, bson.E{Key: "kind", Value: p.Kind})
	}
	if created := createdRange(p.CreatedAfter, p.CreatedBefore); created != nil {
		filter = append(filter, bson.E{Key: "created_at", Value: created})
	}
	docs, err := b.findDocs(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(p.MaxOrDefault())))
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	t, err := b.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	res := &backend.JobBulkResult{Taken: len(docs)}
	for _, d := range docs {
		res.LastID = d.ID
		as := bson.D{{Key: "_id", Value: d.ID}, {Key: "state", Value: d.State}, {Key: "fence", Value: d.Fence}}
		var (
			c  *change
			ok bool
		)
		switch p.Action {
		case backend.BulkRetry:
			if backend.NeedsKeyBack(d.row()) {
				res.UniqueRetries = append(res.UniqueRetries, d.ID)
				continue
			}
			c, err = retryChange(d, t)
		case backend.BulkCancel:
			c, err = cancelChange(d, t)
		case backend.BulkDelete:
			dr, derr := b.jobs.DeleteOne(ctx, as)
			if derr != nil {
				return nil, fmt.Errorf("%s jobs: %w", p.Action, derr)
			}
			if dr.DeletedCount > 0 {
				res.Changed++
			}
			continue
		}
		if err != nil {
			continue // the state moved out of the action's reach
		}
		if ok, err = b.apply(ctx, as, c); err != nil {
			return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
		}
		if ok {
			res.Changed++
		}
	}
	return res, nil
}
