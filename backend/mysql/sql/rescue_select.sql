-- Rescue, in one transaction: lock expired leases (SKIP LOCKED where
-- the server has it; "LIMIT n FOR UPDATE [SKIP LOCKED]" is appended),
-- then return them to the queue or discard them at max attempts. A
-- rescued job keeps its run_at, and so its place in the queue. Running
-- rows, of every queue, are the phase 2 range of the claim index; the
-- lease end is read from the row (heartbeats move no index entry).
SELECT id, attempt, max_attempts FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 2 AND leased_until < UTC_TIMESTAMP(6) ORDER BY leased_until
