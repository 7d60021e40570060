-- Settling: parents lose their flag once, so each is settled once.
UPDATE {{s}}.spool_jobs SET has_dependents = false
WHERE id = ANY($1::bigint[]) AND has_dependents AND state IN ('completed', 'discarded', 'cancelled')
RETURNING id, state::text, coalesce(batch_id, 0)
