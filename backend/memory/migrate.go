package memory

import (
	"context"

	"github.com/spoolq/spool/backend"
)

// Migrate implements backend.Backend; a store in memory has no schema to
// migrate.
func (b *Backend) Migrate(context.Context) error { return b.check() }

// SchemaVersion implements backend.Backend: always current.
func (b *Backend) SchemaVersion(context.Context) (backend.SchemaVersion, error) {
	return backend.SchemaVersion{Current: 1, Latest: 1}, b.check()
}
