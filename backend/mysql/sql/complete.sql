-- Complete: the batch's plain successes, on rows lock_for_finish locked
-- and found running under their lease; or, on the fast path
-- (completeFast), on the rows that still hold the leases given by
-- "AND (id, fence) IN (…)" after the list. The id list is appended.
UPDATE {{db}}.spool_jobs SET state = 'completed', finalized_at = UTC_TIMESTAMP(6),
  leased_until = NULL, leased_by = NULL
WHERE state = 'running' AND id IN 
