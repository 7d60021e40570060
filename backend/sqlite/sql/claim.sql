-- Claim (?1 now, ?2 lease, ?3 claim id, ?4 queue, ?5 max): due pending rows
-- of one queue in claim order. The write lock makes it exclusive, so it needs
-- no row locks; INDEXED BY keeps it on the ordered partial index whatever
-- the statistics say. Nothing is claimed from a paused queue. It returns
-- only what the claim does not know (claimColumns in claimscan.go): the queue,
-- the state, the lease and the attempt time are the parameters.
UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_pending
  WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND queue = ?4 AND run_at <= ?1
    AND NOT EXISTS (SELECT 1 FROM spool_queues WHERE name = ?4 AND paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT ?5
)
RETURNING {{claim_cols}}
