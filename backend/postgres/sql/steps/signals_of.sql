-- Signals of the job $1, by name.
SELECT name, payload::text, created_at FROM {{s}}.spool_signals WHERE job_id = $1 ORDER BY name
