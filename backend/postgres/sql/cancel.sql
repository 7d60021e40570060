-- Cancel: a running job keeps no lease; its holder sees the loss at its
-- next heartbeat and its late writes are fenced out by state.
UPDATE {{s}}.spool_jobs j SET state = 'cancelled', finalized_at = now(), leased_until = NULL, leased_by = NULL, wait_kind = NULL
WHERE j.id = $1 AND j.state NOT IN ('completed', 'discarded', 'cancelled')
RETURNING {{jcols}}
