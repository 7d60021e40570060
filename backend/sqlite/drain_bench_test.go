package sqlite_test

import (
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/conformance"
)

// BenchmarkDrain is conformance.BenchDrain on a SQLite file: the root
// package's BenchmarkDrain (the runtime on the memory store) on SQLite;
// cpu-µs/job includes SQLite's, which runs in this process.
func BenchmarkDrain(b *testing.B) {
	conformance.BenchDrain(b, func(b *testing.B) backend.Backend { return newBackend(b, nil) })
}
