package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/spoolq/spool/backend"
)

// JobInsertMany implements backend.Backend. Jobs without unique keys go in
// one ordered insertMany (one write on the embedded engine; on a server,
// a connection lost part way may leave the first part written: see
// docs/mongo.md). A unique job is inserted alone: the unique partial index
// refuses it while another job holds its key, and the holder is reported.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	r, err := b.jobInsertMany(ctx, p)
	return r, ctxError(ctx, err)
}

func (b *Backend) jobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	if err := b.checkSchema(ctx); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if err := noTx(p.Tx); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if len(p.Jobs) == 0 {
		return &backend.JobInsertManyResult{}, nil
	}
	t, err := b.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	first, err := b.nextIDs(ctx, len(p.Jobs))
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	res := &backend.JobInsertManyResult{IDs: make([]int64, len(p.Jobs))}
	if !backend.AnyUnique(p.Jobs) {
		docs := make([]any, len(p.Jobs))
		for i, j := range p.Jobs {
			docs[i] = newDoc(first+int64(i), j, t)
			res.IDs[i] = first + int64(i)
		}
		if _, err := b.jobs.InsertMany(ctx, docs); err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		res.Count = len(docs)
		if p.NoIDs {
			res.IDs = nil
		}
		return res, nil
	}
	for i, j := range p.Jobs {
		id, dup, err := b.insertOne(ctx, newDoc(first+int64(i), j, t))
		if err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		res.IDs[i] = id
		if dup {
			if res.Duplicates == nil {
				res.Duplicates = make([]bool, len(p.Jobs))
			}
			res.Duplicates[i] = true
			continue
		}
		res.Count++
	}
	return res, nil
}

// insertOne inserts d, or, when another job holds its unique key, reports
// that job's id and true. A holder that lets go of the key between the
// refused insert and its lookup is met by inserting again.
func (b *Backend) insertOne(ctx context.Context, d *jobDoc) (int64, bool, error) {
	for {
		_, err := b.jobs.InsertOne(ctx, d)
		if err == nil {
			return d.ID, false, nil
		}
		if d.UKey == "" || !duplicateKey(err) {
			return 0, false, err
		}
		var holder struct {
			ID int64 `bson:"_id"`
		}
		err = b.jobs.FindOne(ctx, bson.D{{Key: "ukey", Value: d.UKey}}).Decode(&holder)
		if err == nil {
			return holder.ID, true, nil
		}
		if !notFound(err) {
			return 0, false, fmt.Errorf("find the holder of a unique key: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
	}
}
