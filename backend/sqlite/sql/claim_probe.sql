-- Claim probe (?1 queue, ?2 now): whether a claim would find anything, read
-- from a read connection, so an idle poll never takes the write lock.
SELECT 1 FROM spool_jobs INDEXED BY spool_jobs_pending
WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND queue = ?1 AND run_at <= ?2
  AND NOT EXISTS (SELECT 1 FROM spool_queues WHERE name = ?1 AND paused_at IS NOT NULL)
LIMIT 1
