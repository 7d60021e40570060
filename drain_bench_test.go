package spool_test

import (
	"context"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

// BenchmarkDrain is conformance.BenchDrain on the memory store: the
// runtime around the store's calls with the memory store's own work.
func BenchmarkDrain(b *testing.B) {
	conformance.BenchDrain(b, func(b *testing.B) backend.Backend {
		be := memory.New()
		b.Cleanup(func() { _ = be.Close() })
		if err := be.Migrate(context.Background()); err != nil {
			b.Fatal(err)
		}
		return be
	})
}
