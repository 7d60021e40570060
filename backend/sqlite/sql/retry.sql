-- Retry (?1 now, ?2 id): a finished or pending job becomes available now
-- with a fresh set of attempts. The fence is kept, so old leases stay
-- fenced out.
UPDATE spool_jobs SET state = 'available', attempt = 0, run_at = ?1, finalized_at = NULL
WHERE id = ?2 AND state NOT IN ('running', 'waiting')
RETURNING {{cols}}
