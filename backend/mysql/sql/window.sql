-- Optimistic window: the queue's head, read without locks. "LIMIT n"
-- is appended.
SELECT {{cols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE queue = ? AND pending = 1 AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority, run_at, id
