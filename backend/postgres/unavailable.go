package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spoolq/spool/backend"
)

// openError marks a failure of Open with backend.ErrUnavailable when it may
// pass by itself (see unavailable), so that backend.Open tries again.
func openError(err error) error {
	if unavailable(err) {
		return fmt.Errorf("open postgres: %w: %w", backend.ErrUnavailable, withCause(err))
	}
	return fmt.Errorf("open postgres: %w", err)
}

// unavailable reports a failure to reach the server that may pass without
// anyone changing anything: the connection was refused, reset, closed or
// timed out,
// the host is unreachable or its name does not resolve yet, or the server
// answered that it cannot take the session now. The server's other answers
// are final: a rejected password (28P01) or role (28000), a database that
// does not exist (3D000), a refused TLS or protocol setting.
func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P03", // cannot_connect_now: starting up, shutting down, in recovery
			"53300",                                     // too_many_connections (also: slots reserved for superusers)
			"53000",                                     // insufficient_resources
			"57P01",                                     // admin_shutdown: the session ended as the server stopped
			"57P02",                                     // crash_shutdown
			"08000", "08003", "08006", "08001", "08004": // connection exceptions
			return true
		}
		return false
	}
	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
	)
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// errNoConnectionFree says why a connection was refused with SQLSTATE 53300
// (too_many_connections), in words an operator acts on.
const errNoConnectionFree = "the server has no connection free (max_connections reached; other clients hold the rest)"

// noConnectionFree reports a connection refused because the server had no
// slot free (SQLSTATE 53300). Nothing was sent on it, and the refusal may
// pass as other clients disconnect.
func noConnectionFree(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300"
}

// markNoConnectionFree marks a refusal for want of a connection slot with
// backend.ErrNotWritten (nothing was sent) and backend.ErrUnavailable (it
// may pass by itself), and says so in the message; other errors are
// returned as they are.
func markNoConnectionFree(err error) error {
	if !noConnectionFree(err) || errors.Is(err, backend.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w: %s: %w", backend.ErrNotWritten, backend.ErrUnavailable, errNoConnectionFree, err)
}

// withCause prefixes a refusal for want of a connection slot with words that
// say so; other errors are returned as they are.
func withCause(err error) error {
	if noConnectionFree(err) {
		return fmt.Errorf("%s: %w", errNoConnectionFree, err)
	}
	return err
}
