-- Step record: a step (?3 name, ?4 result) of the job ?1, written only
-- while the lease (?1 id, ?2 fence) holds it, at ?5 (now), as a row of
-- its own; a name the job has recorded already (a spool_steps row, or a
-- name of one of its sets) is left as it is.
INSERT INTO spool_steps (job_id, name, result, fence, created_at)
SELECT ?1, ?3, ?4, ?2, ?5 FROM spool_jobs WHERE id = ?1 AND fence = ?2 AND state = 'running'
  AND NOT EXISTS (SELECT 1 FROM spool_step_sets AS s, json_each(s.names) AS n WHERE s.job_id = ?1 AND n.value = ?3)
ON CONFLICT (job_id, name) DO NOTHING
