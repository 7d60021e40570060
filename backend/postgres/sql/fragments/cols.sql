-- The column list every JobRow scan reads, in scanJob's order (scan.go).
id, queue, kind, args, state::text, priority, run_at, attempt, max_attempts, fence,
  leased_until, coalesce(leased_by, ''), created_at, attempted_at, finalized_at, errors, tags, metadata,
  coalesce(unique_key, ''), coalesce(unique_states, 0), output, coalesce(flow_key, ''),
  coalesce(wait_kind, ''), deps_left, has_dependents, coalesce(workflow_id, 0), coalesce(workflow_task, ''), coalesce(batch_id, 0)
