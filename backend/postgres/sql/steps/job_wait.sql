-- Wait: park the running job ($1 id, $2 fence) as a snooze does: in state
-- $3 from now plus $4 microseconds, its attempt given back, waiting for
-- the signal $5 (NULL: none). Returns its claim key.
UPDATE {{s}}.spool_jobs SET state = $3::{{s}}.spool_job_state, run_at = now() + $4 * interval '1 microsecond',
  attempt = attempt - 1, leased_until = NULL, leased_by = NULL, wait_signal = $5
WHERE id = $1 AND fence = $2 AND state = 'running'
RETURNING queue, priority, run_at
