package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spoolq/spool/backend"
)

// selfAnnounces reports whether an insert of jobs outside a caller's
// transaction may announce its job itself (insertSelfAnnounced): one job,
// due now, with the waker idle (waker.claimSelf, which the caller must
// release after a true). Not through a transaction pooler: the
// notification's statement must run on the session that inserted, which a
// pooler may change between the two transactions; nor on a pool whose
// connections do not prepare statements.
func (b *Backend) selfAnnounces(p *backend.JobInsertManyParams) bool {
	if p.Tx != nil || b.waker == nil || b.pooled || !b.prepares || len(p.Jobs) != 1 {
		return false
	}
	if j := p.Jobs[0]; j.RunAt != nil || j.Delay > 0 {
		return false
	}
	return b.waker.claimSelf()
}

// insertSelfAnnounced runs an insert statement of one job (insert_wake_after.sql
// or its unique form) and then, in the same round trip but a transaction of
// its own, the job's notification (wake_self.sql): two implicit
// transactions, each closed by its Sync, so that the insert commits before
// the notification is queued and never holds the notification lock across
// its WAL flush, as a NOTIFY in its transaction would. A worker hears of
// the job as the insert's reply leaves the server, not a round trip of the
// waker's later. The notification's failure loses only the wake-up, as the
// waker's does: the job is committed, and workers find it by their poll.
// It returns the insert statement's one row.
func (b *Backend) insertSelfAnnounced(ctx context.Context, query string, args []any) (row insertedRow, err error) {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return row, err
	}
	defer pc.Release()
	conn := pc.Conn()
	// Named after their text: prepared once per connection, as pgx's
	// statement cache does for the other statements.
	insert, err := conn.Prepare(ctx, query, query)
	if err != nil {
		return row, err
	}
	wake, err := conn.Prepare(ctx, b.sql.wakeSelf, b.sql.wakeSelf)
	if err != nil {
		return row, err
	}
	var eqb pgx.ExtendedQueryBuilder
	if err := eqb.Build(conn.TypeMap(), insert, args); err != nil {
		return row, err
	}
	pl := conn.PgConn().StartPipeline(ctx)
	pl.SendQueryStatement(insert, eqb.ParamValues, eqb.ParamFormats, eqb.ResultFormats)
	pl.SendPipelineSync()
	var wq pgx.ExtendedQueryBuilder
	if err := wq.Build(conn.TypeMap(), wake, []any{b.channel}); err != nil {
		_ = pl.Close()
		return row, err
	}
	pl.SendQueryStatement(wake, wq.ParamValues, wq.ParamFormats, wq.ResultFormats)
	if err := pl.Sync(); err != nil {
		_ = pl.Close()
		return row, err
	}
	row, err = readInserted(conn, pl)
	if err == nil {
		err = readSync(pl) // the insert's commit
	}
	if err != nil {
		_ = pl.Close()
		return row, err
	}
	// The notification: its error is dropped (see above).
	if res, nerr := pl.GetResults(); nerr == nil {
		if rr, ok := res.(*pgconn.ResultReader); ok {
			_, _ = rr.Close()
		}
	}
	_ = readSync(pl)
	// An error here came after the insert's commit: only the wake-up is
	// lost (a broken connection is dropped by the pool at Release).
	_ = pl.Close()
	return row, nil
}

// insertedRow is a row of the insert statements' RETURNING: the job's id,
// whether it was a duplicate of a unique job, its run time, and whether it
// is due.
type insertedRow struct {
	id    int64
	dup   bool
	runAt time.Time
	due   bool
}

// readInserted reads the insert statement's result from pl: one row.
func readInserted(conn *pgx.Conn, pl *pgconn.Pipeline) (insertedRow, error) {
	var row insertedRow
	res, err := pl.GetResults()
	if err != nil {
		return row, err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return row, fmt.Errorf("insert reply: unexpected %T", res)
	}
	fields := rr.FieldDescriptions()
	dst := []any{&row.id, &row.dup, &row.runAt, &row.due}
	n := 0
	for rr.NextRow() {
		n++
		vals := rr.Values()
		if len(vals) != len(dst) || len(fields) != len(dst) {
			_, _ = rr.Close()
			return row, fmt.Errorf("insert reply: %d columns, want %d", len(vals), len(dst))
		}
		for i, v := range vals {
			if err := conn.TypeMap().Scan(fields[i].DataTypeOID, fields[i].Format, v, dst[i]); err != nil {
				_, _ = rr.Close()
				return row, fmt.Errorf("insert reply: column %d: %w", i, err)
			}
		}
	}
	if _, err := rr.Close(); err != nil {
		return row, err
	}
	if n != 1 {
		return row, fmt.Errorf("inserted %d of 1 rows", n)
	}
	return row, nil
}

// readSync reads a Sync's reply from pl: the end of an implicit
// transaction, whose commit's error it returns.
func readSync(pl *pgconn.Pipeline) error {
	res, err := pl.GetResults()
	if err != nil {
		return err
	}
	if _, ok := res.(*pgconn.PipelineSync); !ok {
		return fmt.Errorf("pipeline: unexpected %T where a sync was due", res)
	}
	return nil
}
