-- Retry: a finished or pending job becomes available now with a fresh
-- set of attempts. fence is kept, so old leases stay fenced out.
UPDATE {{db}}.spool_jobs SET state = 'available', attempt = 0, run_at = UTC_TIMESTAMP(6), finalized_at = {{never}}
WHERE id = ? AND state NOT IN ('running', 'waiting')
