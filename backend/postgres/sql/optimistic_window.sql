-- Optimistic strategy (spool_claim=optimistic): the queue's head read
-- without locks, in claim order; optimistic_claim.sql claims the rows
-- picked from it.
SELECT id, fence, priority FROM {{s}}.spool_jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
ORDER BY priority, run_at, id
LIMIT $2
