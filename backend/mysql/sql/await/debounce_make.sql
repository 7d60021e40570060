INSERT INTO {{db}}.spool_debounce (debounce_key, job_id, started_at) VALUES (?, NULL, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE debounce_key = debounce_key
