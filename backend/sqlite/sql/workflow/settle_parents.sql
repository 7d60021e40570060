-- Settle, step 1: the jobs of ?1 (a JSON array of ids) that have
-- dependents and are final lose their flag, once: each is settled by the
-- one write that clears it.
UPDATE spool_jobs SET has_dependents = 0
WHERE id IN (SELECT value FROM json_each(?1)) AND has_dependents AND state IN ('completed', 'discarded', 'cancelled')
RETURNING id, state, coalesce(batch_id, 0)
