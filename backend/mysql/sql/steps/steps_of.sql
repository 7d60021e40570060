-- Steps of the job ?, in the order recorded.
SELECT name, result, fence, created_at FROM {{db}}.spool_steps WHERE job_id = ? ORDER BY seq
