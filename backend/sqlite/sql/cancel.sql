-- Cancel (?1 now, ?2 id) a job that is not finished. A running job keeps no
-- lease; its late writes are fenced out by state.
UPDATE spool_jobs
SET state = 'cancelled', finalized_at = ?1, leased_until = NULL, leased_by = NULL, wait_kind = NULL
WHERE id = ?2 AND state NOT IN ('completed', 'discarded', 'cancelled')
RETURNING {{cols}}
