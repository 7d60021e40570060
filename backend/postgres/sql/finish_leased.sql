-- Finish, leased part (schema 12): the outcomes of jobs held in lease
-- rows, in one statement; the rest go to finish.sql after it. Inputs as
-- finish.sql's. Each job's lease row is locked and read as locked, so an
-- outcome applies once and never after the job was moved back into
-- spool_jobs (spool_unlease) or its lease was rescued. The job's row goes
-- back into spool_jobs in its new state (none for a completion with $6,
-- delete completed); the lease row marks it done, or goes with its last
-- job. Returns what finish.sql returns.
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[], $3::smallint[], $4::bigint[], $5::jsonb[])
    AS t(id, fence, outcome, delay_us, err)
),
-- locked and held: the lease rows holding any of $1, locked, and every
-- job still in them (fragments/leased_jobs.sql).
{{leased_jobs}},
hit AS MATERIALIZED (
  SELECT i.outcome, i.delay_us, i.err, h.*
  FROM held h JOIN input i ON i.id = h.id AND i.fence = h.run_fence
  WHERE NOT h.deps
),
written AS (
  INSERT INTO {{s}}.spool_jobs (id, run_at, created_at, attempted_at, finalized_at, fence, state, priority, attempt,
    max_attempts, queue, kind, args, errors, tags, metadata, unique_key, unique_states, output, flow_key,
    workflow_id, workflow_task)
  SELECT h.id,
    CASE WHEN h.outcome IN (2, 3) THEN now() + h.delay_us * interval '1 microsecond' ELSE h.run_at END,
    h.created_at, h.lease_at,
    CASE WHEN h.outcome IN (1, 4, 5) OR (h.outcome = 2 AND h.run_attempt >= h.max_attempts) THEN now() END,
    h.run_fence,
    {{s}}.spool_outcome_state(h.outcome, h.run_attempt, h.max_attempts, h.delay_us),
    h.priority,
    CASE WHEN h.outcome IN (3, 6) THEN h.attempt ELSE h.run_attempt END,
    h.max_attempts, h.queue, h.kind, h.args,
    CASE WHEN h.err IS NULL THEN h.errors
      ELSE coalesce(h.errors, '[]'::jsonb) || jsonb_build_array(h.err || jsonb_build_object('at', now()))
    END,
    h.tags, h.metadata, h.unique_key, h.unique_states, h.output, h.flow_key, h.workflow_id, h.workflow_task
  FROM hit h
  WHERE NOT ($6 AND h.outcome = 1)
  RETURNING id, fence, CASE WHEN state IN ('available', 'retryable', 'scheduled') THEN queue END, priority, run_at
),
-- The lease rows mark their jobs in hit done, or go with their last
-- (fragments/lease_done.sql).
{{lease_done}}
SELECT * FROM written
UNION ALL
SELECT id, run_fence, NULL, priority, run_at FROM hit WHERE $6 AND outcome = 1
