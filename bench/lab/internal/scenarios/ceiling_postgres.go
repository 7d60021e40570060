package scenarios

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
)

// PostgreSQL's raw-SQL loops for the ceiling experiment.

func init() {
	ceilingVariants["postgres"] = []ceilingVariant{
		{
			Name: "cte-keep",
			About: "minimal claim by materialised CTE (FOR UPDATE SKIP LOCKED, sets state, fence, lease), " +
				"then UPDATE … SET state = 'completed' … WHERE id = ANY($1): two statements per batch, rows kept",
			open: pgCeilingSession(pgCTEDelete, pgMarkCompleted),
		},
		{
			Name: "cte-delete",
			About: "minimal claim by materialised CTE (FOR UPDATE SKIP LOCKED, sets state, fence, lease), " +
				"then DELETE … WHERE id = ANY($1): two statements per batch",
			open: pgCeilingSession(pgCTEDelete, pgDeleteByID),
		},
		{
			Name:  "claim-delete",
			About: "one statement per batch: materialised CTE (FOR UPDATE SKIP LOCKED) feeding DELETE … USING",
			open:  pgCeilingSession(pgClaimDelete, ""),
		},
		{
			Name: "lease-delete",
			About: "a lease row per batch: the claim moves the batch out of the jobs table into one row of a lease table " +
				"(DELETE … RETURNING feeding one INSERT), completing deletes that row: one row write per job, not two",
			open: pgCeilingSession(pgLeaseClaim, pgLeaseDelete),
		},
		{
			Name: "lease-keep",
			About: "as lease-delete, completing moves the batch's jobs into an insert-only table of finished jobs, " +
				"a row each (history kept without an UPDATE of the job)",
			open: pgCeilingSession(pgLeaseClaim, pgLeaseArchive),
		},
	}
}

// pgCTEDelete claims a batch with a minimal materialised CTE and deletes it
// by id array. $1 queue, $2 batch size.
const pgCTEDelete = `WITH picked AS MATERIALIZED (
  SELECT id FROM {{table}}
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
UPDATE {{table}} j
SET state = 'running', fence = j.fence + 1, leased_until = now() + interval '30 seconds'
FROM picked WHERE j.id = picked.id
RETURNING j.id`

// pgClaimDelete claims and deletes a batch in one statement.
const pgClaimDelete = `WITH picked AS MATERIALIZED (
  SELECT id FROM {{table}}
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
DELETE FROM {{table}} j USING picked WHERE j.id = picked.id`

// The lease-row design: a claim moves its batch out of the jobs table
// into one row of {{leases}} (the jobs as a JSON array, the lease's end);
// completing the batch deletes that row, or moves its jobs into the
// insert-only {{finished}} table. Returns the lease id and the batch size.
// pgLeaseTables creates both next to the jobs table.
const (
	pgLeaseTables = `CREATE TABLE IF NOT EXISTS {{leases}} (
  id bigserial PRIMARY KEY, leased_until timestamptz NOT NULL, jobs jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS {{finished}} (
  id bigint NOT NULL, queue text NOT NULL, kind text NOT NULL, args jsonb NOT NULL, finalized_at timestamptz NOT NULL)`
	pgLeaseClaim = `WITH picked AS MATERIALIZED (
  SELECT id FROM {{table}}
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
), moved AS (
  DELETE FROM {{table}} j USING picked WHERE j.id = picked.id
  RETURNING j.id, j.queue, j.kind, j.args
)
INSERT INTO {{leases}} (leased_until, jobs)
SELECT now() + interval '30 seconds', jsonb_agg(jsonb_build_object('id', id, 'queue', queue, 'kind', kind, 'args', args))
FROM moved HAVING count(*) > 0
RETURNING id, jsonb_array_length(jobs)`
	pgLeaseDelete  = `DELETE FROM {{leases}} WHERE id = $1`
	pgLeaseArchive = `WITH l AS (DELETE FROM {{leases}} WHERE id = $1 RETURNING jobs)
INSERT INTO {{finished}} (id, queue, kind, args, finalized_at)
SELECT (j->>'id')::bigint, j->>'queue', j->>'kind', j->'args', now() FROM l, jsonb_array_elements(l.jobs) j`
)

// pgMarkCompleted and pgDeleteByID complete a claimed batch, $1 its ids.
const (
	pgMarkCompleted = `UPDATE {{table}} SET state = 'completed', finalized_at = now(), leased_until = NULL
WHERE id = ANY($1)`
	pgDeleteByID = `DELETE FROM {{table}} WHERE id = ANY($1)`
)

// pgCeilingSession returns a ceilingVariant's open function for one of the
// claim statements above and one of the completions (none for claim-delete). Each session is a connection of its own, planned as
// Spool's claim is (sorts and bitmap scans off, here for the session).
func pgCeilingSession(claimSQL, completeSQL string) func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
	return func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
		pg, err := bench.PGBackend(be)
		if err != nil {
			return nil, err
		}
		r := strings.NewReplacer("{{table}}", pgx.Identifier{pg.Schema(), "spool_jobs"}.Sanitize(),
			"{{leases}}", pgx.Identifier{pg.Schema(), "spool_bench_leases"}.Sanitize(),
			"{{finished}}", pgx.Identifier{pg.Schema(), "spool_bench_finished"}.Sanitize())
		claim, complete := r.Replace(claimSQL), r.Replace(completeSQL)
		conn, err := bench.PGConnect(ctx, pg, fmt.Sprintf("lab ceiling %d", session))
		if err != nil {
			return nil, fmt.Errorf("ceiling session: %w", err)
		}
		if _, err := conn.Exec(ctx, `SET enable_sort = off; SET enable_bitmapscan = off`); err != nil {
			_ = conn.Close(context.Background())
			return nil, fmt.Errorf("ceiling session: %w", err)
		}
		if claimSQL == pgLeaseClaim {
			// Sessions open one after another: the first creates the tables.
			if _, err := conn.Exec(ctx, r.Replace(pgLeaseTables)); err != nil {
				_ = conn.Close(context.Background())
				return nil, fmt.Errorf("ceiling session: create lease tables: %w", err)
			}
			step := func(ctx context.Context) (int, error) {
				var lease, n int64
				err := conn.QueryRow(ctx, claim, spool.DefaultQueue, batch).Scan(&lease, &n)
				if errors.Is(err, pgx.ErrNoRows) {
					return 0, nil
				}
				if err != nil {
					return 0, fmt.Errorf("claim into a lease row: %w", err)
				}
				if _, err := conn.Exec(ctx, complete, lease); err != nil {
					return 0, fmt.Errorf("complete a lease row: %w", err)
				}
				return int(n), nil
			}
			return &ceilingSession{step: step, close: func() { _ = conn.Close(context.Background()) }}, nil
		}
		step := func(ctx context.Context) (int, error) {
			if claimSQL == pgClaimDelete {
				tag, err := conn.Exec(ctx, claim, spool.DefaultQueue, batch)
				if err != nil {
					return 0, fmt.Errorf("claim and delete: %w", err)
				}
				return int(tag.RowsAffected()), nil
			}
			rows, err := conn.Query(ctx, claim, spool.DefaultQueue, batch)
			if err != nil {
				return 0, fmt.Errorf("claim: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return 0, fmt.Errorf("claim: %w", err)
			}
			if len(ids) == 0 {
				return 0, nil
			}
			tag, err := conn.Exec(ctx, complete, ids)
			if err != nil {
				return 0, fmt.Errorf("complete: %w", err)
			}
			if int(tag.RowsAffected()) != len(ids) {
				return 0, fmt.Errorf("complete: %d of %d claimed jobs", tag.RowsAffected(), len(ids))
			}
			return len(ids), nil
		}
		return &ceilingSession{step: step, close: func() { _ = conn.Close(context.Background()) }}, nil
	}
}
