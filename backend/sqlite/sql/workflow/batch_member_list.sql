-- Members of batch ?1 after id ?2, at most ?3: its jobs but its callbacks.
SELECT {{cols}} FROM spool_jobs AS j
WHERE j.batch_id = ?1 AND j.id > ?2
  AND NOT EXISTS (SELECT 1 FROM spool_batches AS b WHERE b.id = ?1
    AND j.id IN (coalesce(b.on_success, 0), coalesce(b.on_failure, 0), coalesce(b.on_complete, 0)))
ORDER BY j.id LIMIT ?3
