UPDATE {{s}}.spool_jobs j SET
  state = {{s}}.spool_outcome_state(i.outcome, j.attempt, j.max_attempts, i.delay_us),
  run_at = CASE WHEN i.outcome IN (2, 3) THEN now() + i.delay_us * interval '1 microsecond' ELSE j.run_at END,
  attempt = CASE WHEN i.outcome IN (3, 6) THEN j.attempt - 1 ELSE j.attempt END,
  finalized_at = CASE WHEN i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts) THEN now() END,
  leased_until = NULL, leased_by = NULL,
  -- A final job is settled by this transaction (finishDependents): its
  -- flag goes here, in the same row version.
  has_dependents = NOT (i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts)),
  errors = CASE WHEN i.err IS NULL THEN j.errors
    ELSE coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(i.err || jsonb_build_object('at', now())) END
FROM unnest($1::bigint[], $2::integer[], $3::smallint[], $4::bigint[], $5::jsonb[]) AS i(id, fence, outcome, delay_us, err)
WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running' AND j.has_dependents
RETURNING j.id, j.fence, j.state::text, j.queue, j.priority, j.run_at, coalesce(j.batch_id, 0)
