-- The rows a claim takes (?1 now, ?2 queue, ?3 max): due pending rows of
-- one queue in claim order, none from a paused queue. claim.sql reads them,
-- then claim_lease.sql leases them by id in the same write transaction.
-- INDEXED BY keeps it on the ordered partial index whatever the statistics
-- say.
FROM spool_jobs INDEXED BY spool_jobs_pending
WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND queue = ?2 AND run_at <= ?1
  AND NOT EXISTS (SELECT 1 FROM spool_queues WHERE name = ?2 AND paused_at IS NOT NULL)
ORDER BY priority, run_at, id
LIMIT ?3
