-- Signals of the job ?1, by name.
SELECT name, payload, created_at FROM spool_signals WHERE job_id = ?1 ORDER BY name
