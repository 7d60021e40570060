-- The in-place part of a finish of jobs with dependents (the leased part,
-- finish_deps_leased.sql, runs first). Jobs are found by primary key,
-- never through spool_jobs_running: jobs that run in place (a workflow's
-- tasks did before schema 28) leave in that index an entry for every
-- version of a running row until a vacuum, so a scan of it read every
-- task that ran since (100,000 entries late in a drain of 102,000 tasks)
-- for each batch. The state is compared with the input's column run,
-- which the planner cannot match to that index's predicate.
-- The rows are locked in id order before the update, as heartbeat.sql
-- locks them: the update alone locks in its scan's order, which a bitmap
-- scan makes the order on disk, and a heartbeat of the same running tasks
-- then deadlocked with it (seen in drains of 1,000 workflows under load:
-- BENCHMARKS.md, "The DAG's tasks without an index of their workflow").
WITH i AS MATERIALIZED (
  SELECT *, 'running'::{{s}}.spool_job_state AS run
  FROM unnest($1::bigint[], $2::integer[], $3::smallint[], $4::bigint[], $5::jsonb[]) AS i(id, fence, outcome, delay_us, err)
), held AS MATERIALIZED (
  SELECT j.id FROM {{s}}.spool_jobs j JOIN i ON j.id = i.id AND j.fence = i.fence AND j.state = i.run
  WHERE j.id = ANY (ARRAY(SELECT id FROM i)) AND j.has_dependents
  ORDER BY j.id
  FOR NO KEY UPDATE OF j
)
UPDATE {{s}}.spool_jobs j SET
  state = {{s}}.spool_outcome_state(i.outcome, j.attempt, j.max_attempts, i.delay_us),
  run_at = CASE WHEN i.outcome IN (2, 3) THEN now() + i.delay_us * interval '1 microsecond' ELSE j.run_at END,
  attempt = CASE WHEN i.outcome IN (3, 6) THEN j.attempt - 1 ELSE j.attempt END,
  finalized_at = CASE WHEN i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts) THEN now() END,
  leased_until = NULL, leased_by = NULL,
  -- A final job is settled by this transaction (finishDependents): its
  -- flag goes here, in the same row version.
  has_dependents = NOT (i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts)),
  errors = CASE WHEN i.err IS NULL THEN j.errors
    ELSE coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(i.err || jsonb_build_object('at', now())) END
FROM i
WHERE j.id = ANY (ARRAY(SELECT id FROM held)) AND j.id = i.id AND j.fence = i.fence AND j.state = i.run AND j.has_dependents
RETURNING j.id, j.fence, j.state::text, j.queue, j.priority, j.run_at, coalesce(j.batch_id, 0)
