-- Optimistic strategy (spool_claim=optimistic): the queue's head read
-- without locks, then a claim of the picked rows that applies only
-- where the fence (the row's version) and the pending state are as
-- read. Rows another transaction holds locked are skipped, not waited
-- for: a claim waiting for a row lock while holding its own joined lock
-- cycles with other clients' claims, finishes and heartbeats, each
-- broken only by the server's deadlock check (deadlock_timeout, 1 s by
-- default), long enough for stalled heartbeats to let leases end.
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
won AS MATERIALIZED (
  SELECT j.id FROM {{s}}.spool_jobs j, unnest($1::bigint[], $2::integer[]) AS c(id, fence)
  WHERE j.id = c.id AND j.fence = c.fence AND j.state IN ('available', 'scheduled', 'retryable') AND j.run_at <= now()
  FOR UPDATE OF j SKIP LOCKED
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = {{s}}.spool_next_fence(j.fence, ep.e),
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM won, ep
WHERE j.id = won.id
RETURNING {{jcols}}
