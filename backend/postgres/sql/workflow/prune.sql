WITH e AS (DELETE FROM {{s}}.spool_deps d WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.id = d.child_id)),
w AS (DELETE FROM {{s}}.spool_workflows w WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.workflow_id = w.id
    AND j.id BETWEEN coalesce(w.first_id, 0) AND coalesce(w.last_id, 9223372036854775807))
  AND w.created_at < now() - interval '1 minute')
DELETE FROM {{s}}.spool_batches b WHERE b.finished_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.batch_id = b.id)
