package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// changeEvent is what Listen reads of a change stream event.
type changeEvent struct {
	Op string `bson:"operationType"`
	NS struct {
		Coll string `bson:"coll"`
	} `bson:"ns"`
	Key struct {
		ID any `bson:"_id"`
	} `bson:"documentKey"`
	Doc *struct {
		Queue string `bson:"queue"`
		State string `bson:"state"`
	} `bson:"fullDocument"`
	Update *struct {
		Fields bson.M `bson:"updatedFields"`
	} `bson:"updateDescription"`
}

// Listen implements backend.Notifier through a change stream on the
// database: a job inserted or updated into a pending state wakes its
// queue, a job updated to cancelled is reported (CancelledID; it may not
// have been running, which the holder checks), and a queue resumed (its
// pause document deleted) wakes that queue. On a MongoDB server change
// streams need a replica set; this has run only on lungo's engine.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	stream, err := b.db.Watch(ctx, bson.A{}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	if err != nil {
		return fmt.Errorf("listen: watch: %w", err)
	}
	defer func() { _ = stream.Close(context.WithoutCancel(ctx)) }()
	ready()
	for stream.Next(ctx) {
		var ev changeEvent
		if err := stream.Decode(&ev); err != nil {
			return fmt.Errorf("listen: decode change: %w", err)
		}
		if w, ok := wakeOf(&ev); ok {
			onWake(w)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("listen: change stream ended: %w", stream.Err())
}

// wakeOf is the wake-up a change calls for, if any.
func wakeOf(ev *changeEvent) (backend.Wake, bool) {
	switch ev.NS.Coll {
	case queuesColl:
		if q, ok := ev.Key.ID.(string); ok && ev.Op == "delete" {
			return backend.Wake{Queue: q}, true
		}
	case jobsColl:
		if ev.Doc == nil || (ev.Op != "insert" && ev.Op != "update" && ev.Op != "replace") {
			return backend.Wake{}, false
		}
		if ev.Op == "update" && ev.Update != nil {
			if _, moved := ev.Update.Fields["state"]; !moved {
				return backend.Wake{}, false // a heartbeat, a record
			}
		}
		switch backend.State(ev.Doc.State) {
		case backend.StateAvailable, backend.StateRetryable:
			return backend.Wake{Queue: ev.Doc.Queue}, true
		case backend.StateCancelled:
			if id, ok := ev.Key.ID.(int64); ok && ev.Op == "update" {
				return backend.Wake{CancelledID: id}, true
			}
		}
	}
	return backend.Wake{}, false
}

var _ backend.Notifier = (*Backend)(nil)
