package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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
	case noConnectionFree(err):
		return markNoConnectionFree(err)
	case errors.Is(err, pgconn.ErrConnClosed):
		// pgx (v5.12) reports a connection that died while a statement sent
		// by the simple protocol awaited its reply (every COMMIT, and every
		// statement through a transaction pooler) as "conn closed", safe to
		// retry, as if nothing had been sent: the reply's read error is
		// dropped and the next read finds the connection closed. The
		// statement was sent, and may have committed.
		return fmt.Errorf("%w: %w", backend.ErrOutcomeUnknown, err)
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
// A refusal already marked not written keeps its marks (a refusal for want
// of a connection slot is also backend.ErrUnavailable).
func notWritten(err error) error {
	c := autocommitWriteError(err)
	switch {
	case errors.Is(c, backend.ErrNotWritten):
		return c
	case errors.Is(c, backend.ErrOutcomeUnknown):
		return fmt.Errorf("%w: %w", backend.ErrNotWritten, err)
	}
	return err
}

// errPartlyApplied marks the failure of a later statement of a write made
// of several (a finish's or heartbeat's leased and in-place statements,
// routed): an earlier one committed its part.
var errPartlyApplied = errors.New("an earlier statement of the batch committed its part")

// ownWriteError classifies the error of a write the backend ran on its own
// (own: not in the caller's transaction) as one or more autocommit
// statements: as autocommitWriteError, except that a batch part of which
// committed before a connection fault is never reported as not written. In
// the caller's transaction the error is the caller's to judge and is
// returned as it is.
func ownWriteError(own bool, err error) error {
	if !own || err == nil {
		return err
	}
	c := autocommitWriteError(err)
	if errors.Is(err, errPartlyApplied) && errors.Is(c, backend.ErrNotWritten) {
		return fmt.Errorf("%w: %w", backend.ErrOutcomeUnknown, err)
	}
	return c
}

// ownTx runs fn in a transaction of the backend's own and classifies a
// connection fault by what it says of the commit: before the COMMIT was
// sent nothing can have committed (the server rolls back a transaction
// whose session ended), so a fault then is backend.ErrNotWritten; a fault
// in the COMMIT is classified as an autocommit statement's. Errors the
// server answered with are returned as they are.
func (b *Backend) ownTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return notWritten(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return notWritten(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return autocommitWriteError(err)
	}
	return nil
}

// missingObject reports a server error naming something the schema lacks:
// an undefined table, column, function or object, or a schema that does
// not exist. A store that was never migrated, or only partly, answers so.
func missingObject(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42P01", // undefined_table
		"42703", // undefined_column
		"42883", // undefined_function
		"42704", // undefined_object
		"3F000": // invalid_schema_name
		return true
	}
	return false
}
