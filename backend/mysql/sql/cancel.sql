-- Cancel: a running job keeps no lease; its holder sees the loss at
-- its next heartbeat and its late writes are fenced out by state.
UPDATE {{db}}.spool_jobs SET state = 'cancelled', finalized_at = UTC_TIMESTAMP(6), wait_kind = NULL
WHERE id = ? AND state NOT IN ('completed', 'discarded', 'cancelled')
