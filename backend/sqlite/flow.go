package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// JobClaimFlow implements backend.Backend: the write transaction is the
// flow lock (one writer at a time, in every process sharing the file), and
// the claim's clock is read once, before it, so every time it decides on
// and writes is the same instant.
func (b *Backend) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	b.st.noteLease(p.Lease)
	stmts, err := b.st.claimStmts(ctx)
	if err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		return claim(&flowTx{tx: tx, p: p, now: nowMicros(), stmts: stmts})
	})
	if err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	return nil
}

// flowTx is a flow claim's write transaction.
type flowTx struct {
	tx    *sql.Tx
	p     *backend.JobClaimFlowParams
	now   int64 // microseconds
	stmts claimStatements
}

func (f *flowTx) FlowRunning(ctx context.Context) (*backend.FlowRunning, error) {
	r := &backend.FlowRunning{Now: fromMicros(f.now), Live: map[string]int{}, All: map[string]int{}}
	if err := f.tx.QueryRowContext(ctx, stmt.flowPaused, f.p.Queue).Scan(&r.Paused); err != nil {
		return nil, fmt.Errorf("read pause: %w", err)
	}
	rows, err := f.tx.QueryContext(ctx, stmt.flowRunning, f.p.Queue, f.now)
	if err != nil {
		return nil, fmt.Errorf("read running jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key       string
			live, all int
		)
		if err := rows.Scan(&key, &live, &all); err != nil {
			return nil, fmt.Errorf("read running jobs: %w", err)
		}
		r.Live[key], r.All[key] = live, all
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read running jobs: %w", err)
	}
	return r, nil
}

func (f *flowTx) FlowKeys(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := f.tx.QueryContext(ctx, stmt.flowKeys, f.p.Queue, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list flow keys: %w", err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list flow keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list flow keys: %w", err)
	}
	return keys, nil
}

func (f *flowTx) FlowRates(ctx context.Context, keys []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, k := range keys {
		var tat int64
		switch err := f.tx.QueryRowContext(ctx, stmt.flowRate, f.p.Queue, k).Scan(&tat); {
		case err == sql.ErrNoRows:
		case err != nil:
			return nil, fmt.Errorf("read rate state: %w", err)
		default:
			out[k] = fromMicros(tat)
		}
	}
	return out, nil
}

func (f *flowTx) FlowSaveRates(ctx context.Context, tats map[string]time.Time) error {
	for k, t := range tats {
		if _, err := f.tx.ExecContext(ctx, stmt.flowSaveRate, f.p.Queue, k, t.UnixMicro()); err != nil {
			return fmt.Errorf("save rate state: %w", err)
		}
	}
	return nil
}

// maxUnionParts bounds the parts of one keys' take, well under SQLite's
// limit of 500 terms in a compound SELECT.
const maxUnionParts = 200

// flowPart returns a part of flow_take_keys.sql with its key's and its
// maximum's parameters: numbered ?5 and ?6 in a statement's first part,
// plain ?s in the others, which SQLite numbers on from the largest number
// it has seen (?6, then each part's two), so the parts bind in order. The
// pure-Go driver looks up each parameter's name as it binds it, a walk of
// the statement's numbered parameters: numbering all of a take's (up to
// 400) made its binds quadratic.
func flowPart(part string, first bool) string {
	key, most := "?", "?"
	if first {
		key, most = "?5", "?6"
	}
	return strings.NewReplacer("{{key}}", key, "{{max}}", most).Replace(part)
}

// FlowTake takes jobs of any key, or without a key, with a statement each,
// and the keys' takes with one statement whose parts are UNION ALL'ed: the
// write lock is held for as few statements as it can be.
func (f *flowTx) FlowTake(ctx context.Context, takes []backend.FlowTake, final bool) ([]*backend.JobRow, error) {
	var jobs []*backend.JobRow
	c := claimed{queue: f.p.Queue, claimID: f.p.ClaimID, now: f.now, leaseUS: f.p.Lease.Microseconds()}
	add := func(raws []*rawJob, err error) error {
		if err != nil {
			return err
		}
		got, err := decodeJobs(raws)
		jobs = append(jobs, got...)
		return err
	}
	run := func(query string, args ...any) error {
		rows, err := f.tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		return add(collectRawJobs(rows))
	}
	base := []any{f.now, f.p.Lease.Microseconds(), f.p.ClaimID, f.p.Queue}
	var (
		parts []string
		keyed = slices.Clone(base)
	)
	flush := func() error {
		if len(parts) == 0 {
			return nil
		}
		query := strings.Replace(stmt.flowTakeKeys, "{{picked}}", strings.Join(parts, "\nUNION ALL\n"), 1)
		err := run(query, keyed...)
		parts, keyed = parts[:0], slices.Clone(base)
		return err
	}
	for _, t := range takes {
		var err error
		switch {
		case t.Any:
			err = add(claimRows(ctx, f.tx, f.stmts, c, t.Max)) // JobClaim's own statements
		case t.Key == "":
			err = run(stmt.flowTakeKeyless, append(slices.Clone(base), t.Max, t.Window)...)
		default:
			part := stmt.flowPartKey
			switch t.Order {
			case backend.FlowOrderBlock:
				part = stmt.flowPartBlock
			case backend.FlowOrderStepAside:
				part = stmt.flowPartStep
			}
			parts = append(parts, flowPart(part, len(parts) == 0))
			keyed = append(keyed, t.Key, t.Max)
			if len(parts) == maxUnionParts {
				err = flush()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("take jobs: %w", err)
		}
	}
	if err := flush(); err != nil {
		return nil, fmt.Errorf("take jobs: %w", err)
	}
	slices.SortFunc(jobs, backend.ClaimOrder)
	return jobs, nil
}

// QueueFlowUse implements backend.Backend.
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	now := nowMicros()
	use := backend.FlowUses{}
	err := sqlfilter.ReadRows(ctx, b.st.readers, func(rows *sql.Rows) error {
		var (
			key              string
			running, pending int
		)
		err := rows.Scan(&key, &running, &pending)
		use.Add(key, running, pending)
		return err
	}, stmt.flowUse, p.Queue, now)
	if err == nil {
		err = sqlfilter.ReadRows(ctx, b.st.readers, func(rows *sql.Rows) error {
			var (
				key string
				tat int64
			)
			err := rows.Scan(&key, &tat)
			use.SetRate(key, fromMicros(tat))
			return err
		}, stmt.flowUseRates, p.Queue, now)
	}
	if err != nil {
		return nil, fmt.Errorf("queue flow use: %w", err)
	}
	return use.Sorted(p.Limit), nil
}
