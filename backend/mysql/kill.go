package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend"
)

// Cancelled statements are killed on the server.
//
// go-sql-driver/mysql closes the connection when a statement's context
// ends, and sends nothing else: the server does not notice the closed
// socket while the statement waits (for a row lock, a table's metadata
// lock, a LOCK TABLES), so the statement runs when the lock frees, after
// the call returned. An autocommit INSERT cancelled so was found committed
// once the lock was released. The backend's pool therefore hands the
// driver a context that never ends, and when the caller's does, sends
// KILL QUERY for the connection's statement from a connection of its own
// (killer) and waits for the statement's answer on the live session:
// ER_QUERY_INTERRUPTED (1317) means it was stopped and rolled back (an
// autocommit statement committed nothing; one in the backend's
// transaction leaves it to be rolled back, which the caller does before it
// returns); success means it had finished before the kill, and its result
// stands. Either way the call returns only once the statement is over on
// the server, and its fate is known. When no kill can be sent (the server
// is unreachable), the statement is no longer running while its answer has
// not come (the answer is lost, or the kill reached the session before
// the statement did), or it runs on past killGiveUp, the driver closes
// the connection as before, and the fate is unknown again; the session is
// then killed whole in the background, so that a statement still waiting
// there does not commit later.

// killErrInterrupted is ER_QUERY_INTERRUPTED: the statement was killed.
const killErrInterrupted = 1317

// killErrNoThread is ER_NO_SUCH_THREAD: the session is gone.
const killErrNoThread = 1094

const (
	// killConns bounds the killer's connections: they are not the pool's,
	// so that cancels never wait for a pool all of whose connections hold
	// statements being cancelled. Opened at the first cancel; one is kept
	// idle for killIdle.
	killConns = 4
	killIdle  = 5 * time.Minute
	// killTimeout bounds each of the killer's statements (KILL QUERY, the
	// look at the session), its connection's opening included. It is
	// what a cancelled call may take beyond its context's end when the
	// server does not answer (unreachable): a stop that gives up on its
	// writes (500 ms after its deadline) returns that much later. A KILL
	// is one short round trip on a live server.
	killTimeout = 100 * time.Millisecond
	// killFirstLook is how long after its kill a statement that has not
	// answered is looked at on the server; the wait doubles each round.
	killFirstLook = 10 * time.Millisecond
	killLastLook  = 200 * time.Millisecond
	// killGiveUp bounds the kills of one statement that the server runs
	// on (a commit's flush is not interrupted): past it the driver closes
	// the connection.
	killGiveUp = time.Second
	// killLate bounds the kill of a session whose connection was closed
	// on a fallback.
	killLate = 5 * time.Second
)

// killer sends the kills, on a pool of its own.
type killer struct {
	db *sql.DB
	// kills counts KILL QUERY statements sent; fallbacks the statements
	// whose connection was closed instead (their fate unknown).
	kills, fallbacks atomic.Uint64
}

func newKiller(c driver.Connector) *killer {
	db := sql.OpenDB(connectFailures{c})
	db.SetMaxOpenConns(killConns)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(killIdle)
	return &killer{db: db}
}

// query sends KILL QUERY for the session id. A session that is gone is no
// error: its statement is over.
func (k *killer) query(id uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	k.kills.Add(1)
	_, err := k.db.ExecContext(ctx, "KILL QUERY "+strconv.FormatUint(id, 10))
	var my *mysql.MySQLError
	if errors.As(err, &my) && my.Number == killErrNoThread {
		return nil
	}
	return err
}

// connection kills the session id, whose connection the driver closed
// (KILL CONNECTION: it serves no one now), within killLate.
func (k *killer) connection(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), killLate)
	defer cancel()
	_, _ = k.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatUint(id, 10))
}

// running reports whether the session id is running a statement.
func (k *killer) running(id uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	var command string
	err := k.db.QueryRowContext(ctx, "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&command)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	return command == "Query" || command == "Execute", nil
}

// killedError is a statement whose context ended and which the server
// killed before it finished: it committed nothing (the backend's
// transaction it ran in, if any, is rolled back before the call returns).
// It matches the context's error and the server's.
type killedError struct {
	ctxErr, err error
}

func (e *killedError) Error() string {
	return fmt.Sprintf("%v: the statement was killed on the server before it finished (%v)", e.ctxErr, e.err)
}

func (e *killedError) Unwrap() []error { return []error{e.ctxErr, e.err} }

// killedStatement reports whether err is a statement killed on its
// context's end.
func killedStatement(err error) bool {
	var k *killedError
	return errors.As(err, &k)
}

// killConnector opens the pool's connections, each knowing its session
// id, and marks connection failures as connectError.
type killConnector struct {
	driver.Connector
	kill *killer
}

// Connect implements driver.Connector.
func (c killConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, &connectError{err}
	}
	kc, ok := newKillConn(conn, c.kill)
	if !ok {
		return conn, nil // a driver without the context interfaces: as it is
	}
	if kc.id, err = sessionID(ctx, kc); err != nil {
		_ = conn.Close()
		return nil, &connectError{err}
	}
	return kc, nil
}

// sessionID reads the session's id (CONNECTION_ID()): one round trip per
// connection, on its opening.
func sessionID(ctx context.Context, c *killConn) (uint64, error) {
	rows, err := c.query.QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		return 0, fmt.Errorf("read the session id: %w", err)
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return 0, fmt.Errorf("read the session id: %w", err)
	}
	var s string
	switch x := v[0].(type) {
	case int64:
		return uint64(x), nil
	case uint64:
		return x, nil
	case []byte:
		s = string(x)
	case string:
		s = x
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the session id: %v (%w)", v[0], err)
	}
	return id, nil
}

// killConn is a pool connection whose statements are killed on the server
// when their context ends (see above). It has every interface of the
// driver's connection that database/sql looks for.
type killConn struct {
	driver.Conn
	id   uint64
	kill *killer
	// doomed is set when a kill fell back (fallBack): the killer ends the
	// session in the background, so the connection must not go back to the
	// pool even when its statement had answered after all (IsValid).
	doomed atomic.Bool
	begin  driver.ConnBeginTx
	prep   driver.ConnPrepareContext
	exec   driver.ExecerContext
	query  driver.QueryerContext
	ping   driver.Pinger
	reset  driver.SessionResetter
	valid  driver.Validator
	check  driver.NamedValueChecker
}

func newKillConn(conn driver.Conn, k *killer) (*killConn, bool) {
	c := &killConn{Conn: conn, kill: k}
	var ok [8]bool
	c.begin, ok[0] = conn.(driver.ConnBeginTx)
	c.prep, ok[1] = conn.(driver.ConnPrepareContext)
	c.exec, ok[2] = conn.(driver.ExecerContext)
	c.query, ok[3] = conn.(driver.QueryerContext)
	c.ping, ok[4] = conn.(driver.Pinger)
	c.reset, ok[5] = conn.(driver.SessionResetter)
	c.valid, ok[6] = conn.(driver.Validator)
	c.check, ok[7] = conn.(driver.NamedValueChecker)
	for _, o := range ok {
		if !o {
			return nil, false
		}
	}
	return c, true
}

// BeginTx implements driver.ConnBeginTx.
func (c *killConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	w, inner, err := c.watch(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.begin.BeginTx(inner, opts)
	return tx, w.end(err)
}

// ExecContext implements driver.ExecerContext.
func (c *killConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	w, inner, err := c.watch(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.exec.ExecContext(inner, query, args)
	return res, w.end(err)
}

// QueryContext implements driver.QueryerContext. The watch lasts until the
// rows are closed: the statement may still run while they are read.
func (c *killConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	w, inner, err := c.watch(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.query.QueryContext(inner, query, args)
	if err != nil || w == nil {
		return rows, w.end(err)
	}
	return &killRows{Rows: rows, w: w}, nil
}

// PrepareContext implements driver.ConnPrepareContext (a prepare changes
// nothing: the driver closes the connection on cancel, as it would).
func (c *killConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.prep.PrepareContext(ctx, query)
}

// Ping implements driver.Pinger.
func (c *killConn) Ping(ctx context.Context) error { return c.ping.Ping(ctx) }

// ResetSession implements driver.SessionResetter.
func (c *killConn) ResetSession(ctx context.Context) error { return c.reset.ResetSession(ctx) }

// IsValid implements driver.Validator: database/sql asks before it puts a
// connection back in the pool. A doomed one is not: a statement that
// answered while its kill fell back (its KILL QUERY timed out under load)
// returns its result, and the session the killer then ended in the
// background failed the pool's next statement on it with "invalid
// connection" (a hard stop's cancelled call, then a read, 2026-12-02).
func (c *killConn) IsValid() bool { return !c.doomed.Load() && c.valid.IsValid() }

// CheckNamedValue implements driver.NamedValueChecker.
func (c *killConn) CheckNamedValue(nv *driver.NamedValue) error { return c.check.CheckNamedValue(nv) }

// stmtWatch is one statement's watch of its caller's context.
type stmtWatch struct {
	c      *killConn
	ctx    context.Context    // the caller's
	cancel context.CancelFunc // the driver's context: it closes the connection
	stop   func() bool        // the context.AfterFunc of kill
	// answered is closed when the statement's call returned; killed when
	// kill returned, after which closed says whether it had the driver
	// close the connection.
	answered, killed chan struct{}
	closed           bool
}

// watch starts the watch of a statement's context, and returns the context
// the driver gets: one that ends only when kill gives up. A context
// already over sends nothing; a context that never ends is not watched (a
// nil watch).
func (c *killConn) watch(ctx context.Context) (*stmtWatch, context.Context, error) {
	if ctx.Done() == nil {
		return nil, ctx, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", backend.ErrNotWritten, err)
	}
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &stmtWatch{c: c, ctx: ctx, cancel: cancel, answered: make(chan struct{}), killed: make(chan struct{})}
	w.stop = context.AfterFunc(ctx, w.killStatement)
	return w, inner, nil
}

// killStatement kills the statement on the server, and again while it runs
// without answering (a kill that reached the session before its statement
// is lost), until it answers; see above for when it gives up.
func (w *stmtWatch) killStatement() {
	defer close(w.killed)
	start, look := time.Now(), killFirstLook
	for {
		if err := w.c.kill.query(w.c.id); err != nil {
			w.fallBack()
			return
		}
		t := time.NewTimer(look)
		select {
		case <-w.answered:
			t.Stop()
			return
		case <-t.C:
		}
		look = min(2*look, killLastLook)
		running, err := w.c.kill.running(w.c.id)
		if err != nil || !running || time.Since(start) > killGiveUp {
			select {
			case <-w.answered:
			default:
				w.fallBack()
			}
			return
		}
	}
}

// fallBack has the driver close the connection: the statement's fate is
// unknown. The session, no longer the pool's, is killed whole in the
// background with more time (killLate): a statement still waiting on the
// server then does not commit later, though the call cannot know it.
func (w *stmtWatch) fallBack() {
	w.closed = true
	w.c.doomed.Store(true)
	w.c.kill.fallbacks.Add(1)
	w.cancel()
	go w.c.kill.connection(w.c.id)
}

// end ends the watch once the statement's call returned err (settle),
// and ends the driver's context.
func (w *stmtWatch) end(err error) error {
	if w == nil {
		return err
	}
	err = w.settle(err)
	w.cancel()
	return err
}

// settle stops the kills once the statement answered err, and returns the
// call's error: a statement the kill stopped is a killedError; one whose
// connection the driver closed on kill's fallback has the caller's context
// error. It waits for a kill under way, so that no kill is sent once the
// connection goes back to the pool. The driver's context is left to end
// (a query's rows are still to be closed on the live session).
func (w *stmtWatch) settle(err error) error {
	close(w.answered)
	if w.stop() {
		return err
	}
	<-w.killed
	var my *mysql.MySQLError
	switch {
	case err == nil:
		return nil // it finished before the kill: its result stands
	case w.closed:
		return fmt.Errorf("%w (the statement could not be killed on the server: %w)", w.ctx.Err(), err)
	case errors.As(err, &my) && my.Number == killErrInterrupted:
		return &killedError{ctxErr: w.ctx.Err(), err: err}
	}
	return err
}

// killRows are a query's rows, whose statement's watch ends when they are
// closed. It has every interface of the driver's rows that database/sql
// looks for.
type killRows struct {
	driver.Rows
	w       *stmtWatch
	settled bool
}

// Close implements driver.Rows.
func (r *killRows) Close() error {
	err := r.Rows.Close()
	if !r.settled {
		r.settled = true
		err = r.w.settle(err)
	}
	r.w.cancel()
	return err
}

// Next implements driver.Rows: an error other than the rows' end is the
// statement's answer (killed, it is a killedError).
func (r *killRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == nil || err == io.EOF || r.settled {
		return err
	}
	r.settled = true
	return r.w.settle(err)
}

// HasNextResultSet implements driver.RowsNextResultSet.
func (r *killRows) HasNextResultSet() bool {
	n, ok := r.Rows.(driver.RowsNextResultSet)
	return ok && n.HasNextResultSet()
}

// NextResultSet implements driver.RowsNextResultSet.
func (r *killRows) NextResultSet() error {
	n, ok := r.Rows.(driver.RowsNextResultSet)
	if !ok {
		return io.EOF
	}
	return n.NextResultSet()
}

// ColumnTypeScanType implements driver.RowsColumnTypeScanType.
func (r *killRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

// ColumnTypeDatabaseTypeName implements driver.RowsColumnTypeDatabaseTypeName.
func (r *killRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

// ColumnTypeNullable implements driver.RowsColumnTypeNullable.
func (r *killRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

// ColumnTypePrecisionScale implements driver.RowsColumnTypePrecisionScale.
func (r *killRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
