UPDATE {{s}}.spool_debounce SET job_id = $2, started_at = now() WHERE key = $1
