-- Rescue (?1 now, ?2 now as RFC 3339 text, ?3 max): running rows whose lease
-- ended go back to the queue (the attempt counted) or are discarded at max
-- attempts. run_at is kept: a rescued job keeps its place in the queue.
UPDATE spool_jobs SET
  state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'retryable' END,
  finalized_at = CASE WHEN attempt >= max_attempts THEN ?1 END,
  leased_until = NULL,
  leased_by = NULL,
  errors = json_insert(coalesce(errors, '[]'), '$[#]', json_object(
    'attempt', attempt, 'at', ?2,
    'error', 'lease expired: the worker ' || coalesce(leased_by, '') || ' stopped heartbeating (crashed, killed, paused or cut off from the database)'))
WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_leased
  WHERE state = 'running' AND leased_until < ?1
  ORDER BY leased_until
  LIMIT ?3
)
RETURNING state, queue, id, has_dependents
