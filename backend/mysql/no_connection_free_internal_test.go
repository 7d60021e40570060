package mysql

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/spoolq/spool/backend"
)

// TestNoConnectionFreeMarked: a connection refused for want of a free
// connection (1040 too many connections, 1203 the user's quota), as an
// insert, a heartbeat, an outcome write or a claim meets it, is marked not
// written and unavailable and says why; the server's other answers on a
// live session are returned as they are.
func TestNoConnectionFreeMarked(t *testing.T) {
	for _, number := range []uint16{errTooManyConnections, errTooManyUserConnections} {
		refused := &connectError{&mysql.MySQLError{Number: number, Message: "Too many connections"}}
		for name, err := range map[string]error{
			"write":          connWriteError(refused, true),
			"before commit":  connWriteError(refused, false),
			"claim":          markNoConnectionFree(refused),
			"marked already": markNoConnectionFree(connWriteError(refused, true)),
		} {
			if !errors.Is(err, backend.ErrNotWritten) || !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrOutcomeUnknown) {
				t.Errorf("%d %s: %v: want ErrNotWritten and ErrUnavailable", number, name, err)
			}
			if !strings.Contains(err.Error(), "no connection free") {
				t.Errorf("%d %s: %v does not say the server has no connection free", number, name, err)
			}
		}
	}
	dup := &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}
	if err := connWriteError(dup, true); err != error(dup) {
		t.Errorf("a duplicate key was marked: %v", err)
	}
}
