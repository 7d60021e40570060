-- The job that holds unique key ?1, read through spool_jobs_unique (the
-- WHERE clause is the index's predicate, which the planner needs to see).
SELECT id FROM spool_jobs
WHERE unique_key = ?1 AND unique_key IS NOT NULL AND (unique_states >> (CASE state
    WHEN 'available' THEN 0 WHEN 'scheduled' THEN 1 WHEN 'retryable' THEN 2 WHEN 'running' THEN 3
    WHEN 'completed' THEN 4 WHEN 'discarded' THEN 5 ELSE 6 END)) & 1 = 1
