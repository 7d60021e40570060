-- Signal wake: make the job ? due now if it is parked waiting for the
-- signal ?.
UPDATE {{db}}.spool_jobs SET state = 'available', run_at = UTC_TIMESTAMP(6)
WHERE id = ? AND state = 'scheduled' AND wait_signal = ?
