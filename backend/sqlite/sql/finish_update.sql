-- Finish: every outcome of a batch (?2, as finish_delete.sql reads it), each
-- row guarded by (id, fence, running). Outcome codes match backend.Outcome:
-- 1 complete, 2 retry, 3 snooze, 4 cancel, 5 discard, 6 release. ?1 is now;
-- ?3 skips completions (deleted instead). SET expressions read the row as it
-- was before the update.
UPDATE spool_jobs AS j SET
  state = CASE
    WHEN i.outcome = 1 THEN 'completed'
    WHEN i.outcome = 2 AND j.attempt >= j.max_attempts THEN 'discarded'
    WHEN i.outcome = 2 THEN 'retryable'
    WHEN i.outcome = 3 AND i.delay > 0 THEN 'scheduled'
    WHEN i.outcome = 4 THEN 'cancelled'
    WHEN i.outcome = 5 THEN 'discarded'
    ELSE 'available'
  END,
  run_at = CASE WHEN i.outcome IN (2, 3) THEN ?1 + i.delay ELSE j.run_at END,
  attempt = CASE WHEN i.outcome IN (3, 6) THEN j.attempt - 1 ELSE j.attempt END,
  finalized_at = CASE
    WHEN i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts) THEN ?1
  END,
  leased_until = NULL,
  leased_by = NULL,
  errors = CASE WHEN i.err IS NULL THEN j.errors
    ELSE json_insert(coalesce(j.errors, '[]'), '$[#]', json(i.err)) END
FROM {{finish_input}} AS i
WHERE j.id = i.fid AND j.fence = i.ffence AND j.state = 'running' AND NOT (?3 AND i.outcome = 1)
  AND j.has_dependents = ?4
RETURNING id, fence
