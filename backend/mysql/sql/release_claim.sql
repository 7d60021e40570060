-- Release claim: the jobs of one claim call that its caller never
-- received go back, attempt given back; the fence keeps the lost lease
-- void. Running rows are the phase 2 range of the claim index.
UPDATE {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim) SET state = 'available', attempt = attempt - 1
WHERE phase = 2 AND leased_by = ? AND state = 'running'
