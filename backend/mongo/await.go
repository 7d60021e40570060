package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// JobFinishedSince implements backend.Backend, through the index of
// finish times.
func (b *Backend) JobFinishedSince(ctx context.Context, p *backend.JobFinishedSinceParams) ([]*backend.FinishedJob, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	since := micros(p.Since)
	filter := bson.D{
		{Key: "state", Value: bson.D{{Key: "$in", Value: bson.A{string(backend.StateCompleted), string(backend.StateDiscarded), string(backend.StateCancelled)}}}},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "finalized_at", Value: bson.D{{Key: "$gt", Value: since}}}},
			bson.D{{Key: "finalized_at", Value: since}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: p.AfterID}}}},
		}},
	}
	docs, err := b.findDocs(ctx, filter, options.Find().
		SetSort(bson.D{{Key: "finalized_at", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)).
		SetProjection(bson.D{{Key: "args", Value: 0}, {Key: "errors", Value: 0}, {Key: "output", Value: 0}}))
	if err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	out := make([]*backend.FinishedJob, len(docs))
	for i, d := range docs {
		out[i] = &backend.FinishedJob{ID: d.ID, Queue: d.Queue, Kind: d.Kind, State: backend.State(d.State), FinalizedAt: fromMicros(*d.FinalizedAt)}
	}
	return out, nil
}
