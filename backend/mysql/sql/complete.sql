-- Complete: the batch's plain successes, on rows lock_for_finish locked
-- and found running under their lease; or, on the fast path
-- (completeFast), on the rows that still hold the leases given by
-- the lease guard (leaseGuard) after the list. The id list is appended.
-- The lease stays as it was (it means nothing once the job stops
-- running), so every column keeps its length and InnoDB rewrites the row
-- in place.
UPDATE {{db}}.spool_jobs SET state = 'completed', finalized_at = UTC_TIMESTAMP(6)
WHERE state = 'running' AND id IN 
