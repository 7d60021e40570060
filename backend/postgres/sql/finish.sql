-- Finish: every outcome of a batch in one statement, each row guarded
-- by (id, fence, running). Outcome codes match backend.Outcome:
-- 1 complete, 2 retry, 3 snooze, 4 cancel, 5 discard, 6 release.
-- $6 deletes completed rows instead of keeping them. Jobs with dependents
-- are left to finishDependents (workflow.go), which settles them. Rows applied come
-- back as (id, fence), with queue, priority and run_at where the row
-- is pending again (queue NULL otherwise), to lower claim floors.
WITH input AS (
  SELECT * FROM unnest($1::bigint[], $2::integer[], $3::smallint[], $4::bigint[], $5::jsonb[])
    AS t(id, fence, outcome, delay_us, err)
),
deleted AS (
  DELETE FROM {{s}}.spool_jobs j USING input i
  WHERE $6 AND i.outcome = 1 AND j.id = i.id AND j.fence = i.fence AND j.state = 'running' AND NOT j.has_dependents
  RETURNING j.id, j.fence, NULL::text AS queue, j.priority, j.run_at
),
updated AS (
  UPDATE {{s}}.spool_jobs j SET
    state = {{s}}.spool_outcome_state(i.outcome, j.attempt, j.max_attempts, i.delay_us),
    run_at = CASE WHEN i.outcome IN (2, 3) THEN now() + i.delay_us * interval '1 microsecond' ELSE j.run_at END,
    attempt = CASE WHEN i.outcome IN (3, 6) THEN j.attempt - 1 ELSE j.attempt END,
    finalized_at = CASE
      WHEN i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts) THEN now()
    END,
    leased_until = NULL,
    leased_by = NULL,
    errors = CASE WHEN i.err IS NULL THEN j.errors
      ELSE coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(i.err || jsonb_build_object('at', now()))
    END
  FROM input i
  WHERE NOT ($6 AND i.outcome = 1) AND j.id = i.id AND j.fence = i.fence AND j.state = 'running' AND NOT j.has_dependents
  RETURNING j.id, j.fence, CASE WHEN j.state IN ('available', 'retryable', 'scheduled') THEN j.queue END, j.priority, j.run_at
)
SELECT * FROM deleted UNION ALL SELECT * FROM updated
