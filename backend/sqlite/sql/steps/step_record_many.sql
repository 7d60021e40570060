-- Step records of a batch, in one statement: ?1 is a JSON array of
-- [id, fence, name, result] (result as a JSON string of its text), each
-- written at ?2 (now), in the array's order, only while its lease (id,
-- fence) holds the job, as step_record.sql writes one; a name recorded
-- already is left as it is. RETURNING names the records written.
INSERT INTO spool_steps (job_id, name, result, fence, created_at)
SELECT j.id, e.value->>2, e.value->>3, j.fence, ?2
FROM json_each(?1) AS e CROSS JOIN spool_jobs AS j
WHERE j.id = e.value->>0 AND j.fence = e.value->>1 AND j.state = 'running'
ORDER BY e.key
ON CONFLICT (job_id, name) DO NOTHING
RETURNING job_id, fence, name
