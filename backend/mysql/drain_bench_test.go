package mysql_test

import (
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/conformance"
)

// BenchmarkDrain is conformance.BenchDrain on MySQL or MariaDB: the
// root package's BenchmarkDrain (the runtime on the memory store) on
// this backend; cpu-µs/job is the client's alone, the server's is not
// counted.
func BenchmarkDrain(b *testing.B) {
	conformance.BenchDrain(b, func(b *testing.B) backend.Backend { return newBackend(b, nil) })
}
