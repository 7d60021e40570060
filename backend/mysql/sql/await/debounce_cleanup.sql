DELETE FROM {{db}}.spool_debounce
WHERE started_at < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR
  AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_jobs j WHERE j.id = spool_debounce.job_id AND j.state IN ('available', 'scheduled', 'retryable'))
