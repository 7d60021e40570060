-- Release claim ?1: the jobs of one claim call that its caller never
-- received go back, attempt given back; the fence keeps the lost lease void.
UPDATE spool_jobs
SET state = 'available', attempt = attempt - 1, leased_until = NULL, leased_by = NULL
WHERE id IN (SELECT id FROM spool_jobs INDEXED BY spool_jobs_leased WHERE state = 'running' AND leased_by = ?1)
