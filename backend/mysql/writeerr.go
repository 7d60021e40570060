package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"
	"github.com/spoolq/spool/backend"
)

// MySQL error numbers with which the server ends a session mid-statement:
// the statement's fate is not known from them alone.
const (
	errServerShutdown   = 1053 // ER_SERVER_SHUTDOWN
	errConnectionKilled = 1927 // ER_CONNECTION_KILLED (MariaDB)
)

// connWriteError marks an error of the backend's own write (not one in the
// caller's transaction) by what it says about the write's commit. mayCommit
// is whether the failed step could commit: an autocommit statement, or the
// COMMIT of the backend's own transaction. A step before that COMMIT cannot
// have committed anything, whatever happened to the connection: the server
// rolls an unfinished transaction back when its session ends.
//
// backend.ErrNotWritten: no connection could be made, the driver reports that
// nothing was sent (driver.ErrBadConn), or the commit was never sent.
// backend.ErrOutcomeUnknown: the connection failed after a committing step
// was sent. An error the server answered with on a live session is returned
// as it is: the statement failed and rolled back.
func connWriteError(err error, mayCommit bool) error {
	var (
		my      *mysql.MySQLError
		op      *net.OpError
		connect *connectError
	)
	switch {
	case errors.Is(err, backend.ErrNotWritten) || errors.Is(err, backend.ErrOutcomeUnknown):
		return err // classified already
	case noConnectionFree(err):
		return markNoConnectionFree(err)
	case killedStatement(err):
		// Its context ended and the server killed it before it finished
		// (kill.go): an autocommit statement committed nothing, and a
		// transaction's COMMIT is never killed.
		return fmt.Errorf("%w: %w", backend.ErrNotWritten, err)
	case errors.As(err, &my) && my.Number != errServerShutdown && my.Number != errConnectionKilled:
		return err
	case errors.As(err, &connect), errors.Is(err, driver.ErrBadConn), errors.As(err, &op) && op.Op == "dial", !mayCommit:
		return fmt.Errorf("%w: %w", backend.ErrNotWritten, err)
	default:
		return fmt.Errorf("%w: %w", backend.ErrOutcomeUnknown, err)
	}
}

// connectError is a failure to open a connection: nothing was sent on it.
// The driver's errors alone do not say so (a handshake cut by a restarting
// server reads as the same EOF as a statement's lost reply).
type connectError struct{ err error }

func (e *connectError) Error() string { return "connect: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// connectFailures is a connector whose connection failures are marked as
// connectError.
type connectFailures struct{ driver.Connector }

// Connect implements driver.Connector.
func (c connectFailures) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, &connectError{err}
	}
	return conn, nil
}

// writeIn runs fn in the caller's transaction, or else in one of the
// backend's own (writeTx).
func (b *Backend) writeIn(ctx context.Context, callerTx DBTX, fn func(db DBTX) error) error {
	if callerTx != nil {
		return fn(callerTx)
	}
	return b.writeTx(ctx, func(tx *sql.Tx) error { return fn(tx) })
}

// writeTx runs fn in a transaction of the backend's own (inTx, retried on
// lock conflicts) and classifies a failure by what it says of the commit
// (connWriteError): before the COMMIT was sent nothing committed, whatever
// happened to the connection. The answers fn reads from the store (no such
// row, a job in a state the change does not apply to) are returned as they
// are, as are the errors the server answered with on a live session.
func (b *Backend) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	committing := false
	var fnErr error
	err := b.inTx(ctx, func(tx *sql.Tx) error {
		committing, fnErr = false, fn(tx)
		committing = fnErr == nil
		return fnErr
	})
	var se *stateError
	switch {
	case err == nil:
		return nil
	case fnErr != nil && (errors.Is(fnErr, sql.ErrNoRows) || errors.As(fnErr, &se)):
		return err
	}
	return connWriteError(err, committing)
}

// missingObject reports a server error naming something the database
// lacks: a table, column or stored function that does not exist. A
// database that was never migrated, or only partly, answers so.
func missingObject(err error) bool {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		return false
	}
	switch my.Number {
	case 1146, // ER_NO_SUCH_TABLE
		1054, // ER_BAD_FIELD_ERROR (unknown column)
		1305: // ER_SP_DOES_NOT_EXIST (function or procedure)
		return true
	}
	return false
}
