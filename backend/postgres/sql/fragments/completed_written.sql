-- The completed rows of a leased completion that keeps its jobs
-- (complete_leased_keep.sql, complete_leased_keep_steps.sql): each job of
-- hit, whose lease row and fence held, written back into spool_jobs as
-- completed, its attempt's start (lease_at) as attempted_at, with its
-- workflow (a task without dependents; those with them are in rows
-- flagged deps, which hit leaves out).
written AS (
  INSERT INTO {{s}}.spool_jobs (id, run_at, created_at, attempted_at, finalized_at, fence, state, priority, attempt,
    max_attempts, queue, kind, args, errors, tags, metadata, unique_key, unique_states, output, flow_key,
    workflow_id, workflow_task)
  SELECT h.id, h.run_at, h.created_at, h.lease_at, now(), h.run_fence, 'completed', h.priority, h.run_attempt,
    h.max_attempts, h.queue, h.kind, h.args, h.errors, h.tags, h.metadata, h.unique_key, h.unique_states, h.output,
    h.flow_key, h.workflow_id, h.workflow_task
  FROM hit h
)
