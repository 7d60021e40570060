-- Steps of the job $1, in the order recorded.
SELECT name, result::text, fence, created_at FROM {{s}}.spool_steps WHERE job_id = $1 ORDER BY created_at, name
