-- Claim, second statement (?1 now, ?2 lease, ?3 claim id, the ids from ?4
-- on, {{ids}} being as many as the chunk's size bucket: claim.go pads a
-- chunk with its first id): leases the rows claim.sql has just read in the
-- same write transaction, named by id. The write lock keeps them as they
-- were read; the claim checks that it changed as many rows as it read. A
-- rowid IN list is a lookup per id, where the pick of claim.sql run again
-- would walk the pending index and fill a temporary table of its ids a
-- second time.
UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN ({{ids}})
