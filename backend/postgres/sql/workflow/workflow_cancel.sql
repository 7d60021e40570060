UPDATE {{s}}.spool_jobs SET state = 'cancelled', finalized_at = now(), leased_until = NULL, leased_by = NULL, wait_kind = NULL
WHERE workflow_id = $1 AND id BETWEEN (SELECT coalesce(first_id, 0) FROM {{s}}.spool_workflows WHERE id = $1)
  AND (SELECT coalesce(last_id, 9223372036854775807) FROM {{s}}.spool_workflows WHERE id = $1)
  AND state NOT IN ('completed', 'discarded', 'cancelled')
RETURNING id, attempted_at IS NOT NULL AND attempt > 0
