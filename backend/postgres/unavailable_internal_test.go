package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spoolq/spool/backend"
)

// TestUnavailable: the failures Open marks as worth another try, and those
// it does not.
func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"starting up", &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}, true},
		{"too many clients", &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"}, true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, true},
		{"no such host yet", &net.DNSError{Err: "no such host", Name: "db", IsNotFound: true}, true},
		{"handshake cut", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"wrong password", &pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"}, false},
		{"unknown role", &pgconn.PgError{Severity: "FATAL", Code: "28000", Message: `role "x" does not exist`}, false},
		{"missing database", &pgconn.PgError{Severity: "FATAL", Code: "3D000", Message: `database "x" does not exist`}, false},
		{"other", errors.New("tls: bad certificate"), false},
	} {
		if got := unavailable(fmt.Errorf("ping: %w", c.err)); got != c.want {
			t.Errorf("%s: unavailable = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestNoConnectionFreeMarked: a refusal for want of a connection slot
// (SQLSTATE 53300), as a claim, an insert, a heartbeat or an outcome write
// meets it, is marked not written and unavailable and says why; other
// server errors are not.
func TestNoConnectionFreeMarked(t *testing.T) {
	refused := fmt.Errorf("failed to connect: %w", &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"})
	for name, err := range map[string]error{
		"claim":   markNoConnectionFree(refused),
		"write":   autocommitWriteError(refused),
		"own":     ownWriteError(true, refused),
		"marked2": markNoConnectionFree(markNoConnectionFree(refused)),
	} {
		if !errors.Is(err, backend.ErrNotWritten) || !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrOutcomeUnknown) {
			t.Errorf("%s: %v: want ErrNotWritten and ErrUnavailable", name, err)
		}
		if !strings.Contains(err.Error(), "no connection free") {
			t.Errorf("%s: %v does not say the server has no connection free", name, err)
		}
	}
	other := &pgconn.PgError{Severity: "ERROR", Code: "23505"}
	if err := markNoConnectionFree(other); err != other {
		t.Errorf("a unique violation was marked: %v", err)
	}
}
