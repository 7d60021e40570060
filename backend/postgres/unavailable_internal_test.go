package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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
