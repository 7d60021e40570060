-- A recorded periodic job, read in the transaction that recorded it.
SELECT name, schedule, queue, since, last_slot, next_slot, started_at, seen_at
FROM {{db}}.spool_periodic WHERE name = ?
