-- Step record: a step ($3 name, $4 result) of the job $1, written as a
-- set of one (spool_step_sets, schema 25) only while the lease ($1 id, $2
-- fence) holds it in place, whose row it locks until the transaction
-- ends; a name the job has recorded already (in a set or a spool_steps
-- row) is left as it is.
INSERT INTO {{s}}.spool_step_sets (job_id, name, names, results, fence)
SELECT j.id, $3, ARRAY[$3::text], jsonb_build_array($4::jsonb), j.fence FROM {{s}}.spool_jobs j
WHERE j.id = $1 AND j.fence = $2 AND j.state = 'running'
  AND NOT EXISTS (SELECT FROM {{s}}.spool_step_sets s WHERE s.job_id = $1 AND $3::text = ANY (s.names))
  AND NOT EXISTS (SELECT FROM {{s}}.spool_steps s WHERE s.job_id = $1 AND s.name = $3)
FOR UPDATE
ON CONFLICT (job_id, name) DO NOTHING
