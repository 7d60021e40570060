-- The recorded periodic jobs, by name.
SELECT name, schedule, queue, since, last_slot, next_slot, started_at, seen_at
FROM spool_periodic ORDER BY name
