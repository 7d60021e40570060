UPDATE {{db}}.spool_debounce SET job_id = ?, started_at = UTC_TIMESTAMP(6) WHERE debounce_key = ?
