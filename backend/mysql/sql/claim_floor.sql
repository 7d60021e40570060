-- The claim lock of queue ? with its claim floor (schema 20): the queue's
-- row of stripe -1 in spool_flow_stripes, locked to the commit, and
-- whether this claim reads from the head (no floor yet, or the last read
-- from the head is at least ? µs old). No row: the caller creates it with
-- claim_lock.sql, and reads from the head. Params: the head interval
-- (µs), the queue.
SELECT floor_priority, floor_run_at, floor_id,
  floor_id IS NULL OR head_at IS NULL OR head_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
FROM {{db}}.spool_flow_stripes WHERE queue = ? AND stripe = -1 FOR UPDATE
