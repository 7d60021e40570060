package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend"
)

// ErrInvalidValue is returned, before anything is written, for a job whose
// values would not be stored exactly: text that is not valid UTF-8 or does
// not fit its column. In a strict session the server would refuse them too,
// but a caller's transaction may run in a session that is not strict, where
// MySQL truncates or replaces such values silently.
var ErrInvalidValue = errors.New("value cannot be stored exactly")

// Insert batching: rows per statement, and the share of the server's
// max_allowed_packet one statement of several rows may use.
const (
	insertRowsMax      = 1000
	insertPacketFactor = 2
)

// JobInsertMany implements backend.Backend. Rows go in multi-row INSERT
// statements of up to 1,000 rows (fewer when large args would near the
// server's max_allowed_packet); a batch of several statements runs in one
// transaction, so it is all or nothing. A multi-row INSERT is a "simple
// insert" to InnoDB, which gives its rows consecutive auto-increment values
// (stepping by auto_increment_increment) in every innodb_autoinc_lock_mode,
// so the ids follow from LAST_INSERT_ID. NoIDs changes nothing: there is no
// faster bulk path. On a database that lacks the jobs table (or a column
// of it) the error matches backend.ErrSchemaNotMigrated.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	res, err := b.insertMany(ctx, p)
	if err != nil && missingObject(err) {
		return nil, backend.ExplainMissingObject(ctx, b, err)
	}
	return res, err
}

// insertMany is JobInsertMany before its error is explained.
func (b *Backend) insertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if len(p.Jobs) == 0 {
		return &backend.JobInsertManyResult{}, nil
	}
	rows := make([]insertRow, len(p.Jobs))
	for i, j := range p.Jobs {
		if rows[i], err = b.encodeInsert(j); err != nil {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, err)
		}
	}
	unique := backend.AnyUnique(p.Jobs)
	chunks := b.chunkInserts(rows)
	var (
		ids  []int64
		dups []bool
	)
	run := func(ctx context.Context, db DBTX) error {
		if unique {
			var err error
			ids, dups, err = b.insertUnique(ctx, db, p.Jobs, rows)
			return err
		}
		ids = make([]int64, 0, len(rows))
		for _, c := range chunks {
			first, err := b.insertChunk(ctx, db, c)
			if err != nil {
				return err
			}
			for i := range c {
				ids = append(ids, first+int64(i)*b.server.autoIncStep)
			}
		}
		return nil
	}
	switch {
	case callerTx != nil:
		err = run(ctx, callerTx)
	case ctx.Err() != nil:
		err = fmt.Errorf("%w: %w", backend.ErrNotWritten, ctx.Err())
	case len(chunks) == 1 && !unique:
		// The connection first: a context that ends while the insert waits
		// for one sent nothing, which the error of a statement run on the
		// pool could not tell from a cut-off reply.
		conn, cerr := b.db.Conn(ctx)
		if cerr != nil {
			err = connWriteError(cerr, false)
			break
		}
		err = b.retry(ctx, func() error { return run(ctx, conn) })
		_ = conn.Close()
		if err != nil {
			err = connWriteError(err, true)
		}
	default:
		// committing tells a failed COMMIT, whose fate is unknown, from a
		// failure before it, which committed nothing.
		committing := false
		err = b.inTx(ctx, func(tx *sql.Tx) error {
			committing = false
			if err := run(ctx, tx); err != nil {
				return err
			}
			committing = true
			return nil
		})
		if err != nil {
			err = connWriteError(err, committing)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	res := &backend.JobInsertManyResult{Count: len(rows)}
	if !p.NoIDs || unique {
		res.IDs = ids
	}
	if dups != nil {
		res.Duplicates = dups
		for _, d := range dups {
			if d {
				res.Count--
			}
		}
	}
	return res, nil
}

// uniqueHolderRounds bounds insertUnique's rounds for one job: each round
// that finds no holder after a refused insert means the holder left its
// holding states in between, which a second round then finds free.
const uniqueHolderRounds = 10

// insertUnique inserts a call that has unique jobs, row by row: a unique
// row refused by spool_jobs_unique (error 1062, which undoes only that
// statement) reports the key's holder instead. Concurrent inserts of one key
// may deadlock when the first inserter rolls back; the caller's retry of the
// whole transaction covers that.
func (b *Backend) insertUnique(ctx context.Context, db DBTX, jobs []*backend.JobInsertParams, rows []insertRow) ([]int64, []bool, error) {
	ids := make([]int64, len(rows))
	var dups []bool
	for i := range rows {
		for round := 1; ; round++ {
			id, err := b.insertChunk(ctx, db, rows[i:i+1])
			if err == nil {
				ids[i] = id
				break
			}
			if jobs[i].UniqueKey == "" || !isUniqueViolation(err) {
				return nil, nil, err
			}
			err = db.QueryRowContext(ctx, b.sql.uniqueHolder, jobs[i].UniqueKey).Scan(&ids[i])
			if err == nil {
				if dups == nil {
					dups = make([]bool, len(rows))
				}
				dups[i] = true
				break
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return nil, nil, fmt.Errorf("read the holder of a unique key: %w", err)
			}
			if round == uniqueHolderRounds {
				return nil, nil, fmt.Errorf("unique key of job %d: refused %d times, and its holder was gone each time", i, round)
			}
		}
	}
	return ids, dups, nil
}

// isUniqueViolation reports whether err is a write refused by
// spool_jobs_unique.
func isUniqueViolation(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062 && strings.Contains(me.Message, "spool_jobs_unique")
}

// insertRow is one job's SQL tuple and its bound values.
type insertRow struct {
	tuple string
	args  []any
	size  int
}

// encodeInsert checks that a job's values store exactly and renders its
// tuple. Numbers are formatted here; text is bound.
func (b *Backend) encodeInsert(j *backend.JobInsertParams) (insertRow, error) {
	for _, f := range []struct {
		name  string
		value string
		max   int
	}{{"queue", j.Queue, 128}, {"kind", j.Kind, 255}} {
		if !utf8.ValidString(f.value) {
			return insertRow{}, fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidValue, f.name)
		}
		if n := utf8.RuneCountInString(f.value); n < 1 || n > f.max {
			return insertRow{}, fmt.Errorf("%w: %s has %d characters, want 1 to %d", ErrInvalidValue, f.name, n, f.max)
		}
	}
	if len(j.Tags) > 32 {
		return insertRow{}, fmt.Errorf("%w: %d tags, at most 32", ErrInvalidValue, len(j.Tags))
	}
	for _, t := range j.Tags {
		if !utf8.ValidString(t) {
			return insertRow{}, fmt.Errorf("%w: a tag is not valid UTF-8", ErrInvalidValue)
		}
	}
	if !utf8.Valid(j.Args) || !json.Valid(j.Args) {
		return insertRow{}, fmt.Errorf("%w: args are not valid UTF-8 JSON", ErrInvalidValue)
	}
	meta := "{}"
	if len(j.Metadata) > 0 {
		if !utf8.Valid(j.Metadata) || !json.Valid(j.Metadata) {
			return insertRow{}, fmt.Errorf("%w: metadata is not valid UTF-8 JSON", ErrInvalidValue)
		}
		meta = string(j.Metadata)
	}
	tags := []string{}
	if j.Tags != nil {
		tags = j.Tags
	}
	tagJSON, err := json.Marshal(tags)
	if err != nil {
		return insertRow{}, fmt.Errorf("encode tags: %w", err)
	}
	prio := strconv.Itoa(int(j.Priority))
	maxAtt := strconv.Itoa(int(j.MaxAttempts))
	args := []any{j.Queue, j.Kind, string(j.Args)}
	var tuple string
	if j.RunAt != nil {
		at := sqlTime(*j.RunAt)
		tuple = "(?, ?, ?, " + prio + ", CAST(? AS DATETIME(6)), IF(CAST(? AS DATETIME(6)) > UTC_TIMESTAMP(6), 'scheduled', 'available'), " +
			maxAtt + ", ?, ?, UTC_TIMESTAMP(6))"
		args = append(args, at, at)
	} else {
		state := "'available'"
		if j.Delay > 0 {
			state = "'scheduled'"
		}
		tuple = "(?, ?, ?, " + prio + ", UTC_TIMESTAMP(6) + INTERVAL " + strconv.FormatInt(micros(j.Delay), 10) + " MICROSECOND, " +
			state + ", " + maxAtt + ", ?, ?, UTC_TIMESTAMP(6))"
	}
	tuple = strings.TrimSuffix(tuple, ")") + ", ?, ?, ?)"
	args = append(args, string(tagJSON), meta)
	if j.UniqueKey != "" {
		args = append(args, j.UniqueKey, strconv.Itoa(int(j.UniqueStates)))
	} else {
		args = append(args, nil, nil)
	}
	if j.FlowKey != "" {
		args = append(args, j.FlowKey)
	} else {
		args = append(args, nil)
	}
	size := len(tuple) + 64
	for _, a := range args {
		if s, ok := a.(string); ok {
			size += escapedLen(s)
		}
	}
	if size > b.server.maxPacket-len(b.sql.insertHead) {
		return insertRow{}, fmt.Errorf("%w: the job's statement would take %d bytes, over the server's max_allowed_packet of %d",
			ErrInvalidValue, size, b.server.maxPacket)
	}
	return insertRow{tuple: tuple, args: args, size: size}, nil
}

// escapedLen is the length of s as a quoted literal in the statement the
// driver sends (it escapes NUL, newline, return, backslash, quotes and ^Z).
func escapedLen(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 0, '\n', '\r', '\\', '\'', '"', 0x1a:
			n++
		}
	}
	return n
}

// chunkInserts splits rows into statements that stay well below the
// server's max_allowed_packet.
func (b *Backend) chunkInserts(rows []insertRow) [][]insertRow {
	budget := b.server.maxPacket / insertPacketFactor
	var out [][]insertRow
	start, size := 0, 0
	for i, r := range rows {
		if i > start && (i-start >= insertRowsMax || size+r.size > budget) {
			out = append(out, rows[start:i])
			start, size = i, 0
		}
		size += r.size
	}
	return append(out, rows[start:])
}

// insertChunk inserts rows with one statement and returns the first id.
func (b *Backend) insertChunk(ctx context.Context, db DBTX, rows []insertRow) (int64, error) {
	var q strings.Builder
	n := 0
	for _, r := range rows {
		n += len(r.tuple) + 2
	}
	q.Grow(len(b.sql.insertHead) + n)
	q.WriteString(b.sql.insertHead)
	args := make([]any, 0, len(rows)*6)
	for i, r := range rows {
		if i > 0 {
			q.WriteString(",\n")
		}
		q.WriteString(r.tuple)
		args = append(args, r.args...)
	}
	res, err := db.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || int(n) != len(rows) {
		return 0, fmt.Errorf("inserted %d of %d rows (%v)", n, len(rows), err)
	}
	return res.LastInsertId()
}
