-- Flow take (?1 now, ?2 lease, ?3 claim id, ?4 queue, ?5 max, at most 1) of
-- ordered key ?6: its oldest pending job, if due.
UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN (
  SELECT id FROM (
    SELECT id, run_at FROM spool_jobs INDEXED BY spool_jobs_flow_order
    WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL AND queue = ?4 AND flow_key = ?6
    ORDER BY id
    LIMIT 1
  )
  WHERE run_at <= ?1 AND ?5 > 0
)
RETURNING {{cols}}
