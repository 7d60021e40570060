package backend

import (
	"context"
	"fmt"
)

// ExplainMissingObject is for a backend whose statement failed on an object
// the store lacks: a table, column or function that does not exist, which
// is what a store that was never migrated (or only partly) answers. It
// reads the store's schema version and, when that does not match (Check
// fails), returns err followed by the version's error, so that the error
// matches ErrSchemaNotMigrated (or ErrSchemaTooNew), as Client.Start's does,
// and says to run spool migrate. Otherwise, and when the version cannot be
// read, it returns err as it is: the missing object is not Spool's schema's
// doing (a caller's transaction on another database, say).
func ExplainMissingObject(ctx context.Context, be Backend, err error) error {
	v, verr := be.SchemaVersion(ctx)
	if verr != nil {
		return err
	}
	if cerr := v.Check(); cerr != nil {
		return fmt.Errorf("%w: %w", err, cerr)
	}
	return err
}
