-- The result of a claim (claim_write.sql): every claimed job, from the
-- CTEs of claim_moves.sql.
SELECT m.id, m.queue, m.kind, m.args, 'running', m.priority, m.run_at,
  (m.attempt + 1)::smallint, m.max_attempts, {{s}}.spool_next_fence(m.fence, ep.e),
  now() + $3::bigint * interval '1 microsecond', $4::text, m.created_at, now(), NULL::timestamptz,
  m.errors, m.tags, m.metadata, '', 0::smallint, m.output, '', '', 0, m.has_dependents, coalesce(m.workflow_id, 0),
  coalesce(m.workflow_task, ''), 0::bigint
FROM gone m, ep
UNION ALL
SELECT * FROM updated
