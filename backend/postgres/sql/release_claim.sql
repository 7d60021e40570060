-- Release claim: the jobs of one claim call that its caller never
-- received go back, attempt given back; the fence keeps the lost
-- lease void. Scans only running rows (the leased index). Returns each
-- released job's claim key, to announce it (no trigger sees an update).
UPDATE {{s}}.spool_jobs j
SET state = 'available', attempt = j.attempt - 1, leased_until = NULL, leased_by = NULL
WHERE j.state = 'running' AND j.leased_by = $1
RETURNING j.queue, j.priority, j.run_at, j.id
