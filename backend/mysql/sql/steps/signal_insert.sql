-- Signal: keep the signal (job_id, name, payload) unless one of that name
-- was sent before: the first one wins (a duplicate key is ignored; the
-- client checked every value, so nothing else can be).
INSERT IGNORE INTO {{db}}.spool_signals (job_id, name, payload, created_at) VALUES (?, ?, ?, UTC_TIMESTAMP(6))
