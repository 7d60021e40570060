SELECT {{cols}} FROM {{s}}.spool_jobs j
WHERE j.batch_id = $1 AND j.id > $2
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_batches b WHERE b.id = $1
    AND j.id IN (coalesce(b.on_success, 0), coalesce(b.on_failure, 0), coalesce(b.on_complete, 0)))
ORDER BY j.id LIMIT $3
