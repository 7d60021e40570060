package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spoolq/spool/backend"
)

// autocommitWriteError marks an error of a write that ran as a statement of
// its own (autocommit) by what it says about the write's commit:
// backend.ErrNotWritten when the statement cannot have reached the server
// (no connection, or pgx knows nothing was sent), backend.ErrOutcomeUnknown
// when the connection failed once it may have (the commit can precede the
// lost reply). An error the server answered with on a live session means
// the statement failed and rolled back; it is returned as it is.
func autocommitWriteError(err error) error {
	var (
		connect *pgconn.ConnectError
		pgErr   *pgconn.PgError
	)
	switch {
	case errors.Is(err, backend.ErrNotWritten) || errors.Is(err, backend.ErrOutcomeUnknown):
		return err // classified already
	case errors.As(err, &connect) || pgconn.SafeToRetry(err):
		return fmt.Errorf("%w: %w", backend.ErrNotWritten, err)
	case errors.As(err, &pgErr) && !sessionEnding(pgErr):
		return err
	default:
		return fmt.Errorf("%w: %w", backend.ErrOutcomeUnknown, err)
	}
}

// sessionEnding reports a server error that ends the session (FATAL or
// PANIC: a terminated backend, a shutting-down or crashed server): it can
// arrive after the statement's commit and before its reply, so it does not
// prove that the statement failed.
func sessionEnding(e *pgconn.PgError) bool {
	if e.Severity == "FATAL" || e.Severity == "PANIC" {
		return true
	}
	return len(e.Code) == 5 && (e.Code[:2] == "08" || e.Code[:3] == "57P")
}

// insertError classifies an insert's error when the insert ran on its own
// (tx nil). In the caller's transaction nothing commits until the caller
// commits, so the error is the caller's to judge and is returned as it is.
func insertError(tx backend.Tx, err error) error {
	if tx != nil {
		return err
	}
	return autocommitWriteError(err)
}

// notWritten marks a connection failure during a read that precedes a write:
// whatever the read's fate, the write was never sent.
func notWritten(err error) error {
	if c := autocommitWriteError(err); errors.Is(c, backend.ErrOutcomeUnknown) || errors.Is(c, backend.ErrNotWritten) {
		return fmt.Errorf("%w: %w", backend.ErrNotWritten, err)
	}
	return err
}
