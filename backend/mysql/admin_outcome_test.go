package mysql_test

import (
	"testing"

	"github.com/spoolq/spool/conformance"
)

// proxiedFaults is the outcome-fault harness of a new database: a client
// through a proxy, and an inserter and a reader past it.
func proxiedFaults(t *testing.T) conformance.Faults {
	t.Helper()
	direct, proxied, proxy := proxiedMySQL(t)
	return conformance.Faults{
		Client:   insertOnlyClient(t, proxied),
		Inserter: insertOnlyClient(t, direct),
		Direct:   direct,
		Proxy:    proxy,
	}
}

// TestAdminWritesWithoutServerAreNotWritten: with the server unreachable,
// cancel, retry, delete, bulk actions and pauses fail with ErrNotWritten
// and change nothing.
func TestAdminWritesWithoutServerAreNotWritten(t *testing.T) {
	t.Parallel()
	conformance.AdminWritesWithoutServer(t, proxiedFaults(t))
}

// mysqlCommit is the text of a COM_QUERY COMMIT, not READ-COMMITTED.
const mysqlCommit = "\x03COMMIT"

// TestAdminWriteReplyLostIsOutcomeUnknown: a cancel, retry or bulk cancel
// whose COMMIT's reply is lost fails with ErrOutcomeUnknown, and it did
// commit: the case the error exists to warn of.
func TestAdminWriteReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	conformance.AdminWriteReplyLost(t, proxiedFaults(t),
		conformance.AdminCommits{Cancel: mysqlCommit, Retry: mysqlCommit, BulkCancel: mysqlCommit})
}
