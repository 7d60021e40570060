-- Release claim: the jobs of one claim call that its caller never
-- received go back, attempt given back; the fence keeps the lost lease
-- void. Running rows are the non-null part of the leased index.
UPDATE {{db}}.spool_jobs SET state = 'available', attempt = attempt - 1, leased_until = NULL, leased_by = NULL
WHERE leased_until IS NOT NULL AND leased_by = ? AND state = 'running'
