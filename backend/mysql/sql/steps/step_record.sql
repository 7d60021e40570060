-- Step record: a step (job_id, name, result, fence) of a job whose lease
-- the same transaction found holding it (held.sql, shared lock); a name
-- recorded already fails with error 1062.
INSERT INTO {{db}}.spool_steps (job_id, name, result, fence, created_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
