-- Record periodic job ?1 (schedule ?2, queue ?3, since ?4, last slot ?5,
-- next slot ?6, started at ?7: microseconds or NULL) at ?8, the store's
-- now: since is kept from the first record, the last slot only moves
-- forward, and started_at takes ?7 when the stored one is NULL or before
-- ?9. Returns the row as stored.
INSERT INTO spool_periodic AS p (name, schedule, queue, since, last_slot, next_slot, started_at, seen_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (name) DO UPDATE SET
  schedule = excluded.schedule,
  queue = excluded.queue,
  last_slot = CASE WHEN excluded.last_slot IS NULL THEN p.last_slot
                   WHEN p.last_slot IS NULL THEN excluded.last_slot
                   ELSE max(p.last_slot, excluded.last_slot) END,
  next_slot = excluded.next_slot,
  started_at = CASE WHEN excluded.started_at IS NOT NULL AND (p.started_at IS NULL OR p.started_at < ?9)
                    THEN excluded.started_at ELSE p.started_at END,
  seen_at = excluded.seen_at
RETURNING name, schedule, queue, since, last_slot, next_slot, started_at, seen_at
