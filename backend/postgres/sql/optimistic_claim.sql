-- Optimistic strategy (spool_claim=optimistic): the queue's head read
-- without locks, then a claim of the picked rows that applies only
-- where the fence (the row's version) and the pending state are as
-- read. Arrays are sorted by id and the claim runs as a nested loop
-- (see claimOptimistic), so concurrent claims lock rows in one order.
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = {{s}}.spool_next_fence(j.fence, ep.e),
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM unnest($1::bigint[], $2::integer[]) AS c(id, fence), ep
WHERE j.id = c.id AND j.fence = c.fence AND j.state IN ('available', 'scheduled', 'retryable') AND j.run_at <= now()
RETURNING {{jcols}}
