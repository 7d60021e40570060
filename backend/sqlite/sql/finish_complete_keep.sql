-- Finish plain completions, keeping the rows: completed at ?1, the lease
-- cleared. The leases as in finish_complete_delete.sql. What it writes is
-- what finish_update.sql writes for a completion without an error. Run
-- without its last line too (completes.run): keep RETURNING id last.
UPDATE spool_jobs SET state = 'completed', finalized_at = ?1, leased_until = NULL, leased_by = NULL
WHERE id IN ({{ids}}) AND fence = ?2 AND state = 'running' AND NOT has_dependents
RETURNING id
