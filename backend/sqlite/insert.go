package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spoolq/spool/backend"
)

// insertColumns are bound per row by insertSQL, in this order.
const insertColumns = 13

// maxInsertRows keeps one INSERT's bound variables under SQLite's limit of
// 32766.
const maxInsertRows = 1000

// insertSQL returns a multi-row INSERT of n rows.
func insertSQL(n int) string {
	var b strings.Builder
	b.Grow(160 + n*24)
	b.WriteString(stmt.insertHead)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	b.WriteString(" RETURNING id")
	return b.String()
}

// insertUniqueSQL inserts one row unless its unique key is held, in which
// case it returns no row (spool_jobs_unique is the only unique index a new
// row can conflict with: ids come from AUTOINCREMENT).
var insertUniqueSQL = strings.TrimSuffix(insertSQL(1), " RETURNING id") + " ON CONFLICT DO NOTHING RETURNING id"

// fullInsertSQL is the statement for a full chunk, built once.
var fullInsertSQL = insertSQL(maxInsertRows)

// preparedChunksMax is how many chunks of an insert are built before the
// write lock is taken.
const preparedChunksMax = 10

// insertChunk is one multi-row INSERT, ready to run.
type insertChunk struct {
	query string
	n     int
	args  []any
}

// prepareInsert builds the INSERT of jobs (at most maxInsertRows), appending
// its arguments to args, and records in wake the queues of jobs due now.
func prepareInsert(jobs []*backend.JobInsertParams, now int64, wake map[string]struct{}, args []any) (insertChunk, error) {
	for _, j := range jobs {
		at := now + j.Delay.Microseconds()
		if j.RunAt != nil {
			at = j.RunAt.UnixMicro()
		}
		state := backend.StateAvailable
		if at > now {
			state = backend.StateScheduled
		} else {
			wake[j.Queue] = struct{}{}
		}
		tags := "[]"
		if len(j.Tags) > 0 {
			t, err := json.Marshal(j.Tags)
			if err != nil {
				return insertChunk{}, fmt.Errorf("encode tags: %w", err)
			}
			tags = string(t)
		}
		meta := "{}"
		if len(j.Metadata) > 0 {
			meta = string(j.Metadata)
		}
		var uKey, uStates any // NULL unless unique
		if j.UniqueKey != "" {
			uKey, uStates = j.UniqueKey, int64(j.UniqueStates)
		}
		var flowKey any // NULL unless keyed
		if j.FlowKey != "" {
			flowKey = j.FlowKey
		}
		args = append(args, j.Queue, j.Kind, string(j.Args), int64(j.Priority), at, now, string(state),
			int64(j.MaxAttempts), tags, meta, uKey, uStates, flowKey)
	}
	query := fullInsertSQL
	if len(jobs) != maxInsertRows {
		query = insertSQL(len(jobs))
	}
	return insertChunk{query: query, n: len(jobs), args: args}, nil
}

// JobInsertMany implements backend.Backend: multi-row INSERTs of up to 1,000
// rows, in one write transaction (the caller's, or one of the backend's own).
// NoIDs changes nothing: reading the ids back costs little here. On a file
// that lacks the jobs table (or a column of it) the error matches
// backend.ErrSchemaNotMigrated.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	res, err := b.insertMany(ctx, p)
	if err != nil && missingObject(err) {
		return nil, backend.ExplainMissingObject(ctx, b, err)
	}
	return res, err
}

// missingObject reports an error naming a table or column the file lacks,
// as a file that was never migrated, or only partly, answers. SQLite gives
// such errors the generic code SQLITE_ERROR; only the message tells them.
func missingObject(err error) bool {
	if sqliteCode(err) != 1 {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "no such table: ") || strings.Contains(msg, "no such column: ")
}

// insertMany is JobInsertMany before its error is explained.
func (b *Backend) insertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if len(p.Jobs) == 0 {
		return &backend.JobInsertManyResult{}, nil
	}
	if backend.AnyUnique(p.Jobs) {
		return b.insertUnique(ctx, tx, p.Jobs)
	}
	// Everything but the statements is done before the write lock is taken
	// (encoding, conversions, the statements' text), for the first
	// preparedChunksMax chunks: a larger insert builds the rest under the
	// lock, where its statements take far longer anyway, so that its memory
	// stays bounded by a chunk.
	now := nowMicros()
	wake := map[string]struct{}{}
	prepared := make([]insertChunk, 0, min((len(p.Jobs)+maxInsertRows-1)/maxInsertRows, preparedChunksMax))
	for start := 0; start < len(p.Jobs) && len(prepared) < preparedChunksMax; start += maxInsertRows {
		c, err := prepareInsert(p.Jobs[start:min(start+maxInsertRows, len(p.Jobs))], now, wake, nil)
		if err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		prepared = append(prepared, c)
	}
	ids := make([]int64, 0, len(p.Jobs))
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		ids = ids[:0]
		var buf []any
		for i, start := 0, 0; start < len(p.Jobs); i, start = i+1, start+maxInsertRows {
			var c insertChunk
			if i < len(prepared) {
				c = prepared[i]
			} else {
				var err error
				if c, err = prepareInsert(p.Jobs[start:min(start+maxInsertRows, len(p.Jobs))], now, wake, buf[:0]); err != nil {
					return err
				}
				buf = c.args
			}
			rows, err := tx.QueryContext(ctx, c.query, c.args...)
			if err != nil {
				return err
			}
			first := len(ids)
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(ids)-first != c.n {
				return fmt.Errorf("inserted %d of %d rows", len(ids)-first, c.n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	// Rows are inserted in VALUES order with increasing ids; RETURNING's
	// order is not promised, so sort each chunk's (each above the last's).
	for start := 0; start < len(ids); start += maxInsertRows {
		slices.Sort(ids[start:min(start+maxInsertRows, len(ids))])
	}
	// A hint: with a caller's transaction the wake may come before its
	// commit; the claim it causes then waits for the write lock, which the
	// transaction holds until it ends.
	b.st.hub.PublishQueues(wake)
	res := &backend.JobInsertManyResult{Count: len(ids)}
	if !p.NoIDs {
		res.IDs = ids
	}
	return res, nil
}

// insertUnique inserts a call that has unique jobs, row by row in one write
// transaction: a unique row that conflicts on spool_jobs_unique inserts
// nothing and reports the key's holder, which the same transaction then
// reads (under the write lock nobody can change it in between).
func (b *Backend) insertUnique(ctx context.Context, tx *sql.Tx, jobs []*backend.JobInsertParams) (*backend.JobInsertManyResult, error) {
	now := nowMicros()
	wake := map[string]struct{}{}
	chunks := make([]insertChunk, len(jobs))
	for i, j := range jobs {
		var err error
		if chunks[i], err = prepareInsert(jobs[i:i+1], now, wake, nil); err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		if j.UniqueKey != "" {
			chunks[i].query = insertUniqueSQL
		}
	}
	var res *backend.JobInsertManyResult
	err := b.st.write(ctx, tx, func(tx *sql.Tx) error {
		res = &backend.JobInsertManyResult{IDs: make([]int64, len(jobs))}
		for i, c := range chunks {
			err := tx.QueryRowContext(ctx, c.query, c.args...).Scan(&res.IDs[i])
			switch {
			case err == nil:
				res.Count++
				continue
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			if err := tx.QueryRowContext(ctx, stmt.uniqueHolder, jobs[i].UniqueKey).Scan(&res.IDs[i]); err != nil {
				return fmt.Errorf("read the holder of a unique key: %w", err)
			}
			if res.Duplicates == nil {
				res.Duplicates = make([]bool, len(jobs))
			}
			res.Duplicates[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	b.st.hub.PublishQueues(wake)
	return res, nil
}
