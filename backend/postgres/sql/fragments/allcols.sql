-- spool_jobs' columns in table order: the column list of its rows and of
-- spool_leased_jobs'.
id, run_at, created_at, leased_until, attempted_at, finalized_at, fence, state, priority, attempt,
  max_attempts, queue, kind, leased_by, args, errors, tags, metadata, unique_key, unique_states, output, flow_key,
  wait_kind, deps_left, has_dependents, workflow_id, workflow_task, batch_id
