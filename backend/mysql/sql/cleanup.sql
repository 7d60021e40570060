-- Cleanup: params are the smallest positive age, then each state's
-- age twice (0 keeps that state), then the limit; all ages in µs.
DELETE FROM {{db}}.spool_jobs
WHERE finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
  AND ((state = 'completed' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
    OR (state = 'discarded' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
    OR (state = 'cancelled' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND))
ORDER BY finalized_at
LIMIT ?
