-- Rescue: running rows whose lease ended by the DB clock go back to
-- the queue (the attempt counted) or are discarded at max attempts.
-- run_at is kept: a rescued job keeps its place in the queue rather
-- than wait behind the backlog that arrived while it was leased.
WITH expired AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state = 'running' AND leased_until < now()
  ORDER BY leased_until
  LIMIT $1
  FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.spool_jobs j SET
  state = (CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'retryable' END)::{{s}}.spool_job_state,
  finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
  leased_until = NULL,
  leased_by = NULL,
  errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', j.attempt, 'at', now(),
    'error', 'lease expired: the worker ' || coalesce(j.leased_by, '') || ' stopped heartbeating (crashed, killed, paused or cut off from the database)'))
FROM expired e WHERE j.id = e.id
RETURNING j.state::text, j.queue, j.priority, j.run_at, j.id
