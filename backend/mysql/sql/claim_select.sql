-- Pessimistic claim, in a READ COMMITTED transaction: lock up to n due
-- pending rows of a queue in claim order from the claim index,
-- skipping rows others hold; no gap locks, no waits. The suffix
-- "LIMIT n FOR UPDATE SKIP LOCKED" is appended. The database's now
-- comes back with the rows and is the base of the lease.
SELECT {{cols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE queue = ? AND pending = 1 AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority, run_at, id
