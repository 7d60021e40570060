package mysql

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-sql-driver/mysql"
	"github.com/spoolq/spool/backend"
)

// MySQL error numbers with which a server refuses a session for now.
const (
	errTooManyConnections     = 1040 // ER_CON_COUNT_ERROR
	errTooManyUserConnections = 1203 // ER_TOO_MANY_USER_CONNECTIONS
)

// openError marks a failure of Open with backend.ErrUnavailable when it may
// pass by itself (see unavailable), so that backend.Open tries again.
func openError(err error) error {
	if unavailable(err) {
		return fmt.Errorf("open mysql: %w: %w", backend.ErrUnavailable, err)
	}
	return fmt.Errorf("open mysql: %w", err)
}

// unavailable reports a failure to reach the server that may pass without
// anyone changing anything: the connection was refused, reset or timed out,
// the host is unreachable or its name does not resolve yet, the handshake
// was cut (a server starting or stopping), or the server answered that it
// has no connection free or is shutting down. The server's other answers
// are final: access denied (1045), an unknown database (1049), a host
// blocked after too many connection errors (1129, which needs FLUSH HOSTS).
func unavailable(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case errTooManyConnections, errTooManyUserConnections, errServerShutdown, errConnectionKilled:
			return true
		}
		return false
	}
	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
	)
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// errNoConnectionFree says why a connection was refused with error 1040 or
// 1203, in words an operator acts on.
const errNoConnectionFree = "the server has no connection free (max_connections or the user's max_user_connections reached; other clients hold the rest)"

// noConnectionFree reports a connection refused because the server (1040)
// or the user's quota (1203) had no connection free. The server refuses
// before the session starts, so nothing was sent, and the refusal may pass
// as other clients disconnect.
func noConnectionFree(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == errTooManyConnections || my.Number == errTooManyUserConnections)
}

// markNoConnectionFree marks a refusal for want of a connection with
// backend.ErrNotWritten (nothing was sent) and backend.ErrUnavailable (it
// may pass by itself), and says so in the message; other errors are
// returned as they are.
func markNoConnectionFree(err error) error {
	if !noConnectionFree(err) || errors.Is(err, backend.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w: %s: %w", backend.ErrNotWritten, backend.ErrUnavailable, errNoConnectionFree, err)
}
