-- Complete, leased part, completed jobs kept: the common finish of a drain
-- that keeps history ($1 ids, $2 fences, all successes). finish_leased.sql
-- with every outcome a completion: the same lock and rule (each job's
-- lease row locked and read as locked, an outcome applied only under the
-- job's fence and only once), the same completed row written back into
-- spool_jobs, without the per-row choices of outcome, delay and error, and
-- with two arrays sent instead of five. Returns the (id, fence) of each
-- job completed.
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t(id, fence)
),
-- locked and held: the lease rows holding any of $1, locked, and every
-- job still in them (fragments/leased_jobs.sql).
{{leased_jobs}},
hit AS MATERIALIZED (
  SELECT h.* FROM held h JOIN input i ON i.id = h.id AND i.fence = h.run_fence
  WHERE NOT h.deps
),
-- written: each job of hit back in spool_jobs, completed
-- (fragments/completed_written.sql).
{{completed_written}},
-- The lease rows mark their jobs in hit done, or go with their last
-- (fragments/lease_done.sql).
{{lease_done}}
SELECT id, run_fence FROM hit
