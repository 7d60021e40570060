-- Record periodic job $1 (schedule $2, queue $3, since $4, last slot $5,
-- next slot $6, started at $7) at the database's now: since is kept from
-- the first record, the last slot only moves forward (greatest ignores a
-- NULL), and started_at takes $7 when the stored one is NULL or before $8.
-- Returns the row as stored.
INSERT INTO {{s}}.spool_periodic AS p (name, schedule, queue, since, last_slot, next_slot, started_at, seen_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, now())
ON CONFLICT (name) DO UPDATE SET
  schedule = EXCLUDED.schedule,
  queue = EXCLUDED.queue,
  last_slot = greatest(p.last_slot, EXCLUDED.last_slot),
  next_slot = EXCLUDED.next_slot,
  started_at = CASE WHEN EXCLUDED.started_at IS NOT NULL AND (p.started_at IS NULL OR p.started_at < $8)
                    THEN EXCLUDED.started_at ELSE p.started_at END,
  seen_at = now()
RETURNING name, schedule, queue, since, last_slot, next_slot, started_at, seen_at
