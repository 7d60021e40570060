-- Rescue, in one transaction: lock expired leases (SKIP LOCKED where
-- the server has it; "LIMIT n FOR UPDATE [SKIP LOCKED]" is appended),
-- then return them to the queue or discard them at max attempts. A
-- rescued job keeps its run_at, and so its place in the queue.
UPDATE {{db}}.spool_jobs SET
  errors = JSON_ARRAY_APPEND(COALESCE(errors, JSON_ARRAY()), '$', JSON_OBJECT('attempt', attempt, 'at', {{nowjson}},
    'error', CONCAT('lease expired: the worker ', RTRIM(COALESCE(leased_by, '')), ' stopped heartbeating (crashed, killed, paused or cut off from the database)'))),
  finalized_at = IF(attempt >= max_attempts, UTC_TIMESTAMP(6), {{never}}),
  state = IF(attempt >= max_attempts, 'discarded', 'retryable')
WHERE state = 'running' AND leased_until < UTC_TIMESTAMP(6) AND id IN 
