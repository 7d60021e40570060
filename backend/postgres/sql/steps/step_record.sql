-- Step record: a step ($3 name, $4 result) of the job $1, written only
-- while the lease ($1 id, $2 fence) holds it in place, whose row it locks
-- shared until the transaction ends; a name recorded already is left as
-- it is.
INSERT INTO {{s}}.spool_steps (job_id, name, result, fence)
SELECT j.id, $3, $4::jsonb, j.fence FROM {{s}}.spool_jobs j
WHERE j.id = $1 AND j.fence = $2 AND j.state = 'running'
FOR SHARE
ON CONFLICT (job_id, name) DO NOTHING
