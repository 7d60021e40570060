package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// poolSettings are the per-connection settings of one pool.
type poolSettings struct {
	immediate   bool   // BEGIN IMMEDIATE for every transaction (the writer)
	busyMS      int    // busy_timeout; 0 leaves waiting to Spool (the writer: beginImmediate)
	queryOnly   bool   // readers
	synchronous string // SynchronousFull or SynchronousNormal
}

// pragmas returns the PRAGMA assignments ("name=value") every connection of
// the pool runs when it opens, busy_timeout first so the others can wait.
func (s poolSettings) pragmas() []string {
	ps := []string{fmt.Sprintf("busy_timeout=%d", s.busyMS)}
	if s.immediate {
		// Persistent in the file; the writer sets it before any reader opens.
		ps = append(ps, "journal_mode=wal")
	}
	ps = append(ps, "synchronous="+s.synchronous, "temp_store=memory", "cache_size=-16000")
	if s.queryOnly {
		ps = append(ps, "query_only=1")
	}
	return ps
}

// connector opens connections of one driver with a fixed DSN.
type connector struct {
	drv driver.Driver
	dsn string
}

// Connect implements driver.Connector.
func (c *connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }

// Driver implements driver.Connector.
func (c *connector) Driver() driver.Driver { return c.drv }
