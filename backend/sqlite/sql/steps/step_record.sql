-- Step record: a step (?3 name, ?4 result) of the job ?1, written only
-- while the lease (?1 id, ?2 fence) holds it, at ?5 (now); a name
-- recorded already is left as it is.
INSERT INTO spool_steps (job_id, name, result, fence, created_at)
SELECT ?1, ?3, ?4, ?2, ?5 FROM spool_jobs WHERE id = ?1 AND fence = ?2 AND state = 'running'
ON CONFLICT (job_id, name) DO NOTHING
