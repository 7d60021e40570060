-- Signals of the job ?, by name.
SELECT name, payload, created_at FROM {{db}}.spool_signals WHERE job_id = ? ORDER BY name
