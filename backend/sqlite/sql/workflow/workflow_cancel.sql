-- Every task of workflow ?2 that is not final is cancelled.
UPDATE spool_jobs SET state = 'cancelled', finalized_at = ?1, leased_until = NULL, leased_by = NULL, wait_kind = NULL
WHERE workflow_id = ?2 AND state NOT IN ('completed', 'discarded', 'cancelled')
RETURNING id, state = 'cancelled'
