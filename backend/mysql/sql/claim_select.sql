-- Pessimistic claim, in a READ COMMITTED transaction: lock up to n due
-- pending rows of a queue in claim order from the claim index,
-- skipping rows others hold; no gap locks, no waits. The suffix
-- "LIMIT n FOR UPDATE SKIP LOCKED" is appended. The database's now
-- comes back with the rows and is the base of the lease. Nothing is
-- claimed from a paused queue. Params: the queue, twice.
SELECT {{claimcols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
  AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_queues q WHERE q.name = ? AND q.paused_at IS NOT NULL)
ORDER BY priority, run_at, id
