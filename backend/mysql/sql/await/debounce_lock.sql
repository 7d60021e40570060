SELECT job_id FROM {{db}}.spool_debounce WHERE debounce_key = ? FOR UPDATE
