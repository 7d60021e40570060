-- A waiting callback becomes pending.
UPDATE spool_jobs SET deps_left = 0, wait_kind = NULL,
  state = CASE WHEN run_at > ?2 THEN 'scheduled' ELSE 'available' END
WHERE id = ?1 AND state = 'waiting'
RETURNING queue
