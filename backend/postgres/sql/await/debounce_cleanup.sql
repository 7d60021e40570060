-- debounceCleanup deletes the rows of keys whose cycle began over an
-- hour ago and whose job is no longer pending; a row an insert moved
-- meanwhile (started_at now) is kept.
DELETE FROM {{s}}.spool_debounce d
WHERE d.started_at < now() - interval '1 hour'
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.id = d.job_id AND j.state IN ('available', 'scheduled', 'retryable'))
