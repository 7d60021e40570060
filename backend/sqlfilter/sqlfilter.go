// Package sqlfilter builds what the SQL backends build alike: the filter
// conditions of job listings and bulk actions, whose shape depends on which
// filters are given (with ? placeholders, or numbered ones for PostgreSQL:
// Conds.Numbered), the reading of a bulk batch, and row-by-row reads
// (ReadRows, ReadThroughput). Every value is bound; only column names, known
// states and placeholders are written into the statement.
//
// It is public, beside the backend interface in the core module, because
// each SQL backend is a module of its own: it is what they share, versioned
// with the interface they implement, not an internal package of another
// module that promises nothing across versions.
package sqlfilter

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
)

// Conds is a conjunction of conditions and their arguments.
type Conds struct {
	sql  strings.Builder
	Args []any
}

// SQL returns the conditions, each preceded by " AND ".
func (c *Conds) SQL() string { return c.sql.String() }

// Numbered returns the conditions with PostgreSQL's numbered placeholders,
// $first for the first argument: no ? is written but as a placeholder
// (values are bound, states are known words).
func (c *Conds) Numbered(first int) string {
	sql := c.sql.String()
	var b strings.Builder
	n := first
	for {
		i := strings.IndexByte(sql, '?')
		if i < 0 {
			b.WriteString(sql)
			return b.String()
		}
		b.WriteString(sql[:i] + "$" + strconv.Itoa(n))
		sql, n = sql[i+1:], n+1
	}
}

// Eq adds col = v, unless v is empty.
func (c *Conds) Eq(col, v string) {
	if v == "" {
		return
	}
	c.sql.WriteString(" AND " + col + " = ?")
	c.Args = append(c.Args, v)
}

// States adds state IN (…) for states, unless there are none.
func (c *Conds) States(states []backend.State) {
	if len(states) == 0 {
		return
	}
	c.sql.WriteString(" AND state IN (?" + strings.Repeat(", ?", len(states)-1) + ")")
	for _, s := range states {
		c.Args = append(c.Args, string(s))
	}
}

// Cmp adds col op v (op is a comparison written by the caller).
func (c *Conds) Cmp(col, op string, v any) {
	c.sql.WriteString(" AND " + col + " " + op + " ?")
	c.Args = append(c.Args, v)
}

// Bulk returns the conditions a bulk batch of p takes jobs by, besides the
// id bound: queue, kind, the states it takes, and the insert-time range,
// whose bounds timeArg encodes as the backend stores times.
func Bulk(p *backend.JobBulkParams, timeArg func(time.Time) any) *Conds {
	c := &Conds{}
	c.Eq("queue", p.Queue)
	c.Eq("kind", p.Kind)
	states := p.StatesTaken()
	if len(states) == 0 {
		states = []backend.State{"none"} // the filter and the action share no state: no row matches
	}
	c.States(states)
	if p.Action == backend.BulkDelete {
		// A job others wait on stays, as JobDelete refuses it: deleted,
		// it would leave its dependents waiting forever.
		c.sql.WriteString(" AND NOT has_dependents")
	}
	if !p.CreatedAfter.IsZero() {
		c.Cmp("created_at", ">", timeArg(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		c.Cmp("created_at", "<", timeArg(p.CreatedBefore))
	}
	return c
}

// List returns the conditions of a job list after its "id > ?" (the
// caller's first argument, p.AfterID), and the ORDER BY and LIMIT that
// end the statement. An unknown state is an error.
func List(p *backend.JobListParams, timeArg func(time.Time) any) (c *Conds, tail string, err error) {
	for _, s := range p.States {
		if !s.Valid() {
			return nil, "", fmt.Errorf("unknown state %q", s)
		}
	}
	c = &Conds{}
	c.Eq("queue", p.Queue)
	c.Eq("kind", p.Kind)
	if len(p.States) > 0 {
		// States as literals (each a known state, so safe to write): a
		// partial index's condition can be matched against literals, not
		// against bound values.
		names := make([]string, len(p.States))
		for i, s := range p.States {
			names[i] = "'" + string(s) + "'"
		}
		if len(names) == 1 {
			// "=", not "IN" of one: SQLite matches a partial index's
			// "state = 'running'" only to an equality.
			c.sql.WriteString(" AND state = " + names[0])
		} else {
			c.sql.WriteString(" AND state IN (" + strings.Join(names, ", ") + ")")
		}
	}
	if len(p.States) == 1 && p.States[0] == backend.StateRunning {
		// Every running job holds a lease; saying so lets the store read
		// its (small) index of leases instead of the whole table: 0.7 s
		// to a few ms for a queue's running jobs among 10^6 on MariaDB.
		c.sql.WriteString(" AND leased_until IS NOT NULL")
	}
	if p.BeforeID != 0 {
		c.Cmp("id", "<", p.BeforeID)
	}
	if !p.CreatedAfter.IsZero() {
		c.Cmp("created_at", ">", timeArg(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		c.Cmp("created_at", "<", timeArg(p.CreatedBefore))
	}
	order := " ORDER BY id"
	if p.Newest {
		order = " ORDER BY id DESC"
	}
	return c, order + " LIMIT " + strconv.Itoa(p.LimitOrDefault()), nil
}

// BulkColumns are the columns ReadBatch reads, in its order.
const BulkColumns = "id, state, queue, coalesce(unique_key, ''), coalesce(unique_states, 0)"

// Batch is a bulk batch as read, before its change.
type Batch struct {
	Result *backend.JobBulkResult // Taken, LastID and UniqueRetries filled in
	// Change are the ids to change, as statement arguments.
	Change []any
	// Running are the ids of running jobs among them.
	Running []int64
	// Queues are the queues of the jobs to change, each once, in order of
	// first appearance.
	Queues []string
}

// ReadBatch reads rows of BulkColumns, sorting out the unique jobs a retry
// leaves to the caller (backend.NeedsKeyBack). It closes rows.
func ReadBatch(rows *sql.Rows, action backend.BulkAction) (*Batch, error) {
	defer rows.Close()
	b := &Batch{Result: &backend.JobBulkResult{}}
	seen := map[string]bool{}
	for rows.Next() {
		var (
			j     backend.JobRow
			state string
		)
		if err := rows.Scan(&j.ID, &state, &j.Queue, &j.UniqueKey, &j.UniqueStates); err != nil {
			return nil, err
		}
		j.State = backend.State(state)
		b.Result.Taken++
		b.Result.LastID = j.ID
		if action == backend.BulkRetry && backend.NeedsKeyBack(&j) {
			b.Result.UniqueRetries = append(b.Result.UniqueRetries, j.ID)
			continue
		}
		if j.State == backend.StateRunning {
			b.Running = append(b.Running, j.ID)
		}
		if !seen[j.Queue] {
			seen[j.Queue] = true
			b.Queues = append(b.Queues, j.Queue)
		}
		b.Change = append(b.Change, j.ID)
	}
	return b, rows.Err()
}

// IDList returns "(?, ?, …)" for n ids.
func IDList(n int) string { return "(?" + strings.Repeat(", ?", n-1) + ")" }

// Querier is what ReadRows queries: a *sql.DB, *sql.Tx or *sql.Conn.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ReadThroughput reads the rows of a throughput statement (bucket start,
// completed, discarded, cancelled), the start as the store writes it and
// start turns into a time.
func ReadThroughput(ctx context.Context, q Querier, start func(int64) time.Time, query string, args ...any) ([]backend.ThroughputBucket, error) {
	var out []backend.ThroughputBucket
	err := ReadRows(ctx, q, func(rows *sql.Rows) error {
		var (
			at int64
			bk backend.ThroughputBucket
		)
		if err := rows.Scan(&at, &bk.Completed, &bk.Discarded, &bk.Cancelled); err != nil {
			return err
		}
		bk.Start = start(at)
		out = append(out, bk)
		return nil
	}, query, args...)
	return out, err
}

// ReadRows runs query on q and calls scan for each row.
func ReadRows(ctx context.Context, q Querier, scan func(*sql.Rows) error, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
