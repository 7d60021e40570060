-- Signal wake: make the job ?1 due at ?3 (now) if it is parked waiting for
-- the signal ?2; returns its queue.
UPDATE spool_jobs SET state = 'available', run_at = ?3
WHERE id = ?1 AND state = 'scheduled' AND wait_signal = ?2
RETURNING queue
