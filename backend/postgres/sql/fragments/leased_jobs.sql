-- The middle of the leased statements that write jobs back into spool_jobs
-- (finish_leased.sql, complete_leased_keep.sql, finish_deps_leased.sql): locked, the lease rows
-- holding any of $1, locked and read as locked (leased_locked.sql); held, every
-- job still in them, each row's array read once, with its lease row
-- (lease, lease_at, deps: a row of jobs with dependents, which only
-- finish_deps_leased.sql takes) and its running fence and attempt
-- (run_fence, run_attempt). The including statement joins held with its input, never
-- the input re-read per lease row (BENCHMARKS.md, "Joining lease rows
-- with a batch").
{{leased_locked}},
held AS MATERIALIZED (
  SELECT l.id AS lease, l.claimed_at AS lease_at, l.deps, l.fences[j.ordinality] AS run_fence, j.attempt + 1 AS run_attempt, j.*
  FROM locked l CROSS JOIN LATERAL unnest(l.jobs) WITH ORDINALITY AS j
  WHERE j.id <> ALL (l.done)
)
