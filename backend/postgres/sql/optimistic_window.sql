-- Optimistic strategy (spool_claim=optimistic): the queue's head read
-- without locks, then a claim of the picked rows that applies only
-- where the fence (the row's version) and the pending state are as
-- read. Arrays are sorted by id and the claim runs as a nested loop
-- (see claimOptimistic), so concurrent claims lock rows in one order.
SELECT id, fence, priority FROM {{s}}.spool_jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
ORDER BY priority, run_at, id
LIMIT $2
