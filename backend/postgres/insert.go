package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// JobInsertMany implements backend.Backend. With ids wanted, every batch is
// one INSERT … SELECT FROM unnest (faster than COPY with ids reserved up
// front); with NoIDs, batches of CopyThreshold or more rows use COPY.
// Figures in BENCHMARKS.md (BenchmarkInsertMany). On a schema that lacks
// the jobs table (or a column of it) the error matches
// backend.ErrSchemaNotMigrated.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	res, err := b.insertMany(ctx, p)
	if err != nil && missingObject(err) {
		return nil, backend.ExplainMissingObject(ctx, b, err)
	}
	return res, err
}

// insertMany is JobInsertMany before its error is explained.
func (b *Backend) insertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if len(p.Jobs) == 0 {
		return &backend.JobInsertManyResult{}, nil
	}
	if p.Tx == nil {
		// The connection first: a context that ends while the insert waits
		// for one sent nothing, which the error of a statement run on the
		// pool could not tell from a cut-off reply.
		conn, err := b.pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("insert jobs: %w", notWritten(err))
		}
		defer conn.Release()
		db = conn
	}
	if p.NoIDs && len(p.Jobs) >= b.copyThreshold && !backend.AnyUnique(p.Jobs) {
		n, err := b.insertCopy(ctx, db, p.Jobs)
		if err != nil {
			return nil, fmt.Errorf("insert jobs (copy): %w", insertError(p.Tx, err))
		}
		return &backend.JobInsertManyResult{Count: n}, nil
	}
	n := len(p.Jobs)
	var (
		queues   = make([]string, n)
		kinds    = make([]string, n)
		args     = make([]json.RawMessage, n)
		prios    = make([]int16, n)
		runAts   = make([]*time.Time, n)
		delays   = make([]int64, n)
		maxAtt   = make([]int16, n)
		tags     = make([]string, n)
		metadata = make([]json.RawMessage, n)
		uKeys    = make([]string, n)
		uStates  = make([]int16, n)
		flowKeys = make([]string, n)
	)
	for i, j := range p.Jobs {
		queues[i], kinds[i], args[i], prios[i] = j.Queue, j.Kind, j.Args, j.Priority
		runAts[i], delays[i], maxAtt[i] = j.RunAt, micros(j.Delay), j.MaxAttempts
		tags[i] = strings.Join(j.Tags, ",")
		if len(j.Metadata) > 0 {
			metadata[i] = j.Metadata
		}
		uKeys[i], uStates[i] = j.UniqueKey, int16(j.UniqueStates)
		flowKeys[i] = j.FlowKey
	}
	query, wakeQuery := b.sql.insert, b.sql.insertWake
	qargs := []any{queues, kinds, args, prios, runAts, delays, maxAtt, tags, metadata, flowKeys}
	if backend.AnyUnique(p.Jobs) {
		query, wakeQuery = b.sql.insertUnique, b.sql.insertUniqueWake
		qargs = []any{queues, kinds, args, prios, runAts, delays, maxAtt, tags, metadata, uKeys, uStates, flowKeys}
	}
	// announce: the waker announces this insert after its commit.
	announce := p.Tx == nil && b.waker != nil
	if p.Tx == nil && b.wake != WakeAtCommit {
		// The statement tells the trigger to skip its NOTIFY; the waker
		// announces the jobs after the commit (wake.go), or nobody does.
		query = wakeQuery[b.wake]
	}
	if announce {
		// A lone job, inserted while no other insert of this backend is in
		// flight, is announced by its own transaction: the waker's
		// transaction and round trip cost the server and the client more
		// than the NOTIFY does in the insert's, and come later. Inserts
		// that overlap leave their wake-ups to the waker, so that they do
		// not commit one at a time behind each other's WAL flush (the
		// notification lock); so does every insert with a wake gap, whose
		// wake-ups the waker gathers.
		alone := b.inserting.Add(1) == 1
		defer b.inserting.Add(-1)
		if alone && b.waker.gap == 0 && n == 1 && !backend.AnyUnique(p.Jobs) {
			query, announce = b.sql.insertWakeNow, false
			qargs = append(qargs, b.channel)
		}
	}
	res := &backend.JobInsertManyResult{IDs: make([]int64, 0, n)}
	var (
		id    int64
		dup   bool
		runAt time.Time
		due   bool
		wake  queueKeys // the lowest key of the due jobs by queue
	)
	rows, err := db.Query(ctx, query, qargs...)
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&id, &dup, &runAt, &due}, func() error {
			i := len(res.IDs)
			if dup {
				if res.Duplicates == nil {
					res.Duplicates = make([]bool, n)
				}
				res.Duplicates[i] = true
			} else {
				res.Count++
				if due && announce {
					wake.noteJob(queues[i], claimKey{priority: prios[i], runAt: runAt, id: id})
				}
			}
			res.IDs = append(res.IDs, id)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", insertError(p.Tx, err))
	}
	if len(res.IDs) != n {
		return nil, fmt.Errorf("insert jobs: inserted %d of %d rows", len(res.IDs), n)
	}
	if announce {
		b.waker.add(wake)
	}
	return res, nil
}

// insertCopy writes jobs with COPY; ids come from the column default. Run
// times are on the database clock: one SELECT now() when any job is delayed.
func (b *Backend) insertCopy(ctx context.Context, db DBTX, jobs []*backend.JobInsertParams) (int, error) {
	var now time.Time
	for _, j := range jobs {
		if j.RunAt == nil {
			if err := db.QueryRow(ctx, b.sql.now).Scan(&now); err != nil {
				return 0, fmt.Errorf("read database clock: %w", notWritten(err))
			}
			break
		}
	}
	rows := make([][]any, len(jobs))
	for i, j := range jobs {
		at := now.Add(j.Delay)
		if j.RunAt != nil {
			at = *j.RunAt
		}
		state := backend.StateAvailable
		if at.After(now) {
			state = backend.StateScheduled
		}
		tags := j.Tags
		if tags == nil {
			tags = []string{}
		}
		meta := j.Metadata
		if len(meta) == 0 {
			meta = json.RawMessage(`{}`)
		}
		var flowKey *string
		if j.FlowKey != "" {
			flowKey = &j.FlowKey
		}
		rows[i] = []any{j.Queue, j.Kind, j.Args, j.Priority, at, string(state), j.MaxAttempts, tags, meta, flowKey}
	}
	n, err := db.CopyFrom(ctx, pgx.Identifier{b.schema, "spool_jobs"}, copyColumns, pgx.CopyFromRows(rows))
	if err != nil {
		return 0, err
	}
	if int(n) != len(jobs) {
		return 0, fmt.Errorf("copied %d of %d rows", n, len(jobs))
	}
	return len(jobs), nil
}

var copyColumns = []string{"queue", "kind", "args", "priority", "run_at", "state", "max_attempts", "tags", "metadata", "flow_key"}
