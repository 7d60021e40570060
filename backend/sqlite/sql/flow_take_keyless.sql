-- Flow take (?1 now, ?2 lease, ?3 claim id, ?4 queue, ?5 max) of jobs
-- without a key among the first ?6 due pending jobs of the queue in claim
-- order: they have no index of their own, so the look is bounded.
UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN (
  SELECT id FROM (
    SELECT id, flow_key, priority, run_at FROM spool_jobs INDEXED BY spool_jobs_pending
    WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND queue = ?4 AND run_at <= ?1
    ORDER BY priority, run_at, id
    LIMIT ?6
  )
  WHERE flow_key IS NULL
  ORDER BY priority, run_at, id
  LIMIT ?5
)
RETURNING {{cols}}
