-- Prune: edges whose child is gone, workflows with no task left (a
-- minute after their insert, so a workflow being inserted is not taken),
-- finished batches with no job left. A task in a lease row (schema 28) is
-- not gone: its row is found by the span of the lease rows' ids.
WITH e AS (DELETE FROM {{s}}.spool_deps d WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.id = d.child_id)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_leases l WHERE l.span @> d.child_id AND l.ids @> ARRAY[d.child_id]
      AND d.child_id <> ALL (l.done))),
w AS (DELETE FROM {{s}}.spool_workflows w WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.workflow_id = w.id
    AND j.id BETWEEN coalesce(w.first_id, 0) AND coalesce(w.last_id, 9223372036854775807))
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_leases l CROSS JOIN LATERAL unnest(l.jobs) k
    WHERE l.span && int8range(coalesce(w.first_id, 0), coalesce(w.last_id, 9223372036854775806), '[]')
      AND k.workflow_id = w.id AND k.id <> ALL (l.done))
  AND w.created_at < now() - interval '1 minute')
DELETE FROM {{s}}.spool_batches b WHERE b.finished_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.batch_id = b.id)
