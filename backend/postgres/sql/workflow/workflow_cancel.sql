UPDATE {{s}}.spool_jobs SET state = 'cancelled', finalized_at = now(), leased_until = NULL, leased_by = NULL, wait_kind = NULL
WHERE workflow_id = $1 AND state NOT IN ('completed', 'discarded', 'cancelled')
RETURNING id, attempted_at IS NOT NULL AND attempt > 0
