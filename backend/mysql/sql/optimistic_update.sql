-- Optimistic claim: applies only to rows whose fence (their version)
-- is still the one read, and that are still pending and due. The id
-- list and the lease guard (leaseGuard) are appended. The claim id is bound
-- as leaseHolder pads it.
UPDATE {{db}}.spool_jobs SET state = 'running', attempt = attempt + 1, fence = fence + 1,
  leased_until = CAST(? AS DATETIME(6)) + INTERVAL ? MICROSECOND, leased_by = ?, attempted_at = CAST(? AS DATETIME(6))
WHERE phase = 1 AND run_at <= UTC_TIMESTAMP(6) AND id IN 
