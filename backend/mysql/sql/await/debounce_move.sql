-- debounceMove sets the run time (assignments run left to right, so
-- state sees the new run_at): now + window, never before the run time,
-- never after creation + max wait (0: no bound); args replaced when
-- not NULL.
UPDATE {{db}}.spool_jobs SET
  run_at = GREATEST(run_at, LEAST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    IF(? > 0, created_at + INTERVAL ? MICROSECOND, TIMESTAMP('9999-12-31 00:00:00')))),
  state = IF(state = 'available' AND run_at > UTC_TIMESTAMP(6), 'scheduled', state),
  args = COALESCE(?, args)
WHERE id = ?
