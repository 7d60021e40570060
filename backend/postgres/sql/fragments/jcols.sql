-- cols qualified by the alias j, for UPDATE … RETURNING.
j.id, j.queue, j.kind, j.args, j.state::text, j.priority, j.run_at, j.attempt, j.max_attempts,
  j.fence, j.leased_until, coalesce(j.leased_by, ''), j.created_at, j.attempted_at, j.finalized_at, j.errors, j.tags,
  j.metadata, coalesce(j.unique_key, ''), coalesce(j.unique_states, 0), j.output, coalesce(j.flow_key, ''),
  coalesce(j.wait_kind, ''), j.deps_left, j.has_dependents, coalesce(j.workflow_id, 0), coalesce(j.workflow_task, ''),
  coalesce(j.batch_id, 0)
