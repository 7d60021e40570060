package main

import (
	"context"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite" // registers sqlite:// URLs
)

func init() {
	byURL := openSpoolInserter
	openSpoolInserter = func(ctx context.Context, spec *runSpec) (backend.Backend, error) {
		if spec.Path == "" {
			return byURL(ctx, spec)
		}
		// Separate: connections of its own, as another process would have,
		// so the worker learns of its jobs by polling, as River does.
		return sqlite.OpenPath(ctx, spec.Path, &sqlite.Options{Separate: true})
	}
}
