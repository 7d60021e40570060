-- Retry: a finished or pending job becomes available now with a fresh
-- set of attempts. fence is kept, so old leases stay fenced out.
UPDATE {{s}}.spool_jobs j SET state = 'available', attempt = 0, run_at = now(), finalized_at = NULL
WHERE j.id = $1 AND j.state NOT IN ('running', 'waiting')
RETURNING {{jcols}}
