-- Steps of the job ?1, in the order recorded.
SELECT name, result, fence, created_at FROM spool_steps WHERE job_id = ?1 ORDER BY created_at, rowid
