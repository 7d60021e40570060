-- Record a periodic job (name, schedule, queue, since, last slot, next
-- slot, started at; the start is kept unless the stored one is NULL or
-- before the last parameter) at the database's now: since is kept from
-- the first record and the last slot only moves forward. Each assignment
-- reads no column but its own.
INSERT INTO {{db}}.spool_periodic (name, schedule, queue, since, last_slot, next_slot, started_at, seen_at)
VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
  schedule = VALUES(schedule),
  queue = VALUES(queue),
  last_slot = CASE WHEN VALUES(last_slot) IS NULL THEN last_slot
                   WHEN last_slot IS NULL THEN VALUES(last_slot)
                   ELSE GREATEST(last_slot, VALUES(last_slot)) END,
  next_slot = VALUES(next_slot),
  started_at = CASE WHEN VALUES(started_at) IS NOT NULL AND (started_at IS NULL OR started_at < ?)
                    THEN VALUES(started_at) ELSE started_at END,
  seen_at = UTC_TIMESTAMP(6)
