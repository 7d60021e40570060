package testdb

import "github.com/spoolq/spool/backend/backendtest"

// LogBuffer is a bytes.Buffer safe for concurrent writers: the output of a
// logger that several goroutines of a client write to, read by a test. It
// is the conformance suite's, which the root module's own tests use too.
type LogBuffer = backendtest.LogBuffer
