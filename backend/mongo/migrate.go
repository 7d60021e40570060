package mongo

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// schemaVersion is the newest schema this backend knows: the set of
// indexes Migrate creates. MongoDB has no schema to migrate beyond them.
const schemaVersion = 1

// indexes are the jobs collection's indexes.
func (b *Backend) indexes() []mongo.IndexModel {
	ix := []mongo.IndexModel{
		// The claim: the study's compound index, the equality fields
		// first, then the sort (priority, run_at, _id).
		{Keys: bson.D{{Key: "queue", Value: 1}, {Key: "state", Value: 1}, {Key: "priority", Value: 1}, {Key: "run_at", Value: 1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("claim")},
		// Rescue: running jobs by lease end.
		{Keys: bson.D{{Key: "state", Value: 1}, {Key: "leased_until", Value: 1}},
			Options: options.Index().SetName("leases")},
		// Retention, the finished feed and throughput: finished jobs by
		// finish time.
		{Keys: bson.D{{Key: "finalized_at", Value: 1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("finished").SetPartialFilterExpression(bson.D{{Key: "finalized_at", Value: bson.D{{Key: "$exists", Value: true}}}})},
		// Unique keys: only the jobs that hold theirs have ukey.
		{Keys: bson.D{{Key: "ukey", Value: 1}},
			Options: options.Index().SetName("unique_key").SetUnique(true).SetPartialFilterExpression(bson.D{{Key: "ukey", Value: bson.D{{Key: "$exists", Value: true}}}})},
		// Releasing a lost claim.
		{Keys: bson.D{{Key: "leased_by", Value: 1}},
			Options: options.Index().SetName("lease_holder").SetPartialFilterExpression(bson.D{{Key: "leased_by", Value: bson.D{{Key: "$exists", Value: true}}}})},
	}
	if b.embedded {
		// lungo uses indexes only to enforce uniqueness (and TTLs), never
		// to filter or sort, and copies every index on every write: the
		// others would cost each write and serve nothing.
		ix = slices.DeleteFunc(ix, func(m mongo.IndexModel) bool { return m.Options.Unique == nil && m.Options.ExpireAfterSeconds == nil })
	}
	if b.opts.FinishedTTL > 0 {
		ix = append(ix, mongo.IndexModel{Keys: bson.D{{Key: "fin", Value: 1}},
			Options: options.Index().SetName("finished_ttl").SetExpireAfterSeconds(int32(b.opts.FinishedTTL.Seconds()))})
	}
	return ix
}

// Migrate implements backend.Backend: it creates the indexes (creating an
// existing index is a no-op, so many processes may migrate at once) and
// records the schema version.
func (b *Backend) Migrate(ctx context.Context) error {
	v, err := b.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if v.Current > v.Latest {
		return fmt.Errorf("migrate: %w", v.Check())
	}
	if _, err := b.jobs.Indexes().CreateMany(ctx, b.indexes()); err != nil {
		return fmt.Errorf("migrate: create indexes: %w", err)
	}
	_, err = b.meta.UpdateOne(ctx, bson.D{{Key: "_id", Value: "schema"}},
		bson.D{{Key: "$max", Value: bson.D{{Key: "version", Value: schemaVersion}}}}, options.Update().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("migrate: record version: %w", err)
	}
	b.migrated.Store(true)
	return nil
}

// SchemaVersion implements backend.Backend.
func (b *Backend) SchemaVersion(ctx context.Context) (backend.SchemaVersion, error) {
	var doc struct {
		Version int `bson:"version"`
	}
	err := b.meta.FindOne(ctx, bson.D{{Key: "_id", Value: "schema"}}).Decode(&doc)
	if err != nil && !notFound(err) {
		return backend.SchemaVersion{}, fmt.Errorf("read schema version: %w", err)
	}
	return backend.SchemaVersion{Current: doc.Version, Latest: schemaVersion}, nil
}

// checkSchema returns an error matching ErrSchemaNotMigrated until the
// handle has seen the schema current.
func (b *Backend) checkSchema(ctx context.Context) error {
	if b.migrated.Load() {
		return nil
	}
	v, err := b.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if err := v.Check(); err != nil {
		return err
	}
	b.migrated.Store(true)
	return nil
}
