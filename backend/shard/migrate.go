package shard

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// Migrate migrates every shard.
func (b *Backend) Migrate(ctx context.Context) error {
	if err := b.each(func(_ int, be backend.Backend) error { return be.Migrate(ctx) }); err != nil {
		return fmt.Errorf("migrate shards: %w", err)
	}
	return nil
}

// SchemaVersion reports the version of the shard furthest from the newest
// (ahead before behind), so that Check fails if any shard is off.
func (b *Backend) SchemaVersion(ctx context.Context) (backend.SchemaVersion, error) {
	versions := make([]backend.SchemaVersion, len(b.shards))
	err := b.each(func(i int, be backend.Backend) error {
		v, err := be.SchemaVersion(ctx)
		versions[i] = v
		return err
	})
	if err != nil {
		return backend.SchemaVersion{}, fmt.Errorf("schema version: %w", err)
	}
	worst := versions[0]
	for _, v := range versions[1:] {
		switch {
		case worst.Current > worst.Latest:
		case v.Current > v.Latest, v.Current < worst.Current:
			worst = v
		}
	}
	return worst, nil
}
