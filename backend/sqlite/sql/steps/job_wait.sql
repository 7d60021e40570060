-- Wait: park the running job (?1 id, ?2 fence) as a snooze does, in
-- state ?3 from run_at ?4, its attempt given back, waiting for the signal
-- ?5 (NULL: none).
UPDATE spool_jobs SET state = ?3, run_at = ?4, attempt = attempt - 1,
  leased_until = NULL, leased_by = NULL, wait_signal = ?5
WHERE id = ?1 AND fence = ?2 AND state = 'running'
