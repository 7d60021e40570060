-- Optimistic window: the queue's head, read without locks. "LIMIT n"
-- is appended. Params: the queue, twice (the second for the paused check).
SELECT {{claimcols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
  AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_queues q WHERE q.name = ? AND q.paused_at IS NOT NULL)
ORDER BY priority, run_at, id
