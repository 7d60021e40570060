-- Claim, second statement (?1 now, ?2 queue, ?3 max, ?4 lease, ?5 claim
-- id): leases the rows claim.sql has just read in the same write
-- transaction, picked by the same text; the claim checks that it changed
-- as many rows as it read.
UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?4, leased_by = ?5, attempted_at = ?1
WHERE id IN (
  SELECT id
  {{claim_pick}}
)
