-- Flow take (?1 now, ?2 lease, ?3 claim id, ?4 queue, ?5 max) of key ?6's
-- due pending jobs in claim order.
UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_flow
  WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL AND queue = ?4 AND flow_key = ?6 AND run_at <= ?1
  ORDER BY priority, run_at, id
  LIMIT ?5
)
RETURNING {{cols}}
