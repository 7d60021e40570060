-- Wait: park the running job as a snooze does, in state ? from now plus
-- ? microseconds, its attempt given back, waiting for the signal ? (NULL:
-- none), while the lease (id ?, fence ?) holds it.
UPDATE {{db}}.spool_jobs SET state = ?, run_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
  wait_signal = ?, attempt = attempt - 1
WHERE id = ? AND fence = ? AND state = 'running'
