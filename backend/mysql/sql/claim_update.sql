-- The claim itself, by primary key, on rows this transaction holds.
-- Params: now, lease (µs), claim id (as leaseHolder pads it), now;
-- then the id list.
UPDATE {{db}}.spool_jobs SET state = 'running', attempt = attempt + 1, fence = fence + 1,
  leased_until = CAST(? AS DATETIME(6)) + INTERVAL ? MICROSECOND, leased_by = ?, attempted_at = CAST(? AS DATETIME(6))
WHERE state IN {{pending}} AND id IN 
