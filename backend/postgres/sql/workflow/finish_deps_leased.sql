-- The finishes of jobs with dependents held in lease rows (schema 28:
-- rows flagged deps, which the plain leased statements leave alone),
-- written back into spool_jobs as finish_leased.sql writes a job, with
-- every workflow column, in the transaction that settles their
-- dependents (finishDependents). Inputs and result as finish_deps.sql's;
-- its in-place update then takes the rest. A final job's flag is cleared
-- in the row written here, as finish_deps.sql clears it: this
-- transaction settles it.
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[], $3::smallint[], $4::bigint[], $5::jsonb[])
    AS t(id, fence, outcome, delay_us, err)
),
-- locked: the lease rows holding any of $1, locked
-- (fragments/leased_locked.sql).
{{leased_locked}},
-- hit: the jobs of $1 in rows flagged deps, under their fences, joined
-- with the input as they are unnested (complete_deps_leased.sql says why).
hit AS MATERIALIZED (
  SELECT i.outcome, i.delay_us, i.err, l.id AS lease, l.claimed_at AS lease_at, i.fence AS run_fence,
    j.attempt + 1 AS run_attempt, j.*,
    i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt + 1 >= j.max_attempts) AS final
  FROM locked l CROSS JOIN LATERAL unnest(l.jobs) WITH ORDINALITY AS j
  JOIN input i ON i.id = j.id AND i.fence = l.fences[j.ordinality]
  WHERE l.deps AND j.id <> ALL (l.done)
),
written AS (
  INSERT INTO {{s}}.spool_jobs (id, run_at, created_at, attempted_at, finalized_at, fence, state, priority, attempt,
    max_attempts, queue, kind, args, errors, tags, metadata, unique_key, unique_states, output, flow_key,
    wait_kind, deps_left, has_dependents, workflow_id, workflow_task, batch_id)
  SELECT h.id,
    CASE WHEN h.outcome IN (2, 3) THEN now() + h.delay_us * interval '1 microsecond' ELSE h.run_at END,
    h.created_at, h.lease_at,
    CASE WHEN h.final THEN now() END,
    h.run_fence,
    {{s}}.spool_outcome_state(h.outcome, h.run_attempt, h.max_attempts, h.delay_us),
    h.priority,
    CASE WHEN h.outcome IN (3, 6) THEN h.attempt ELSE h.run_attempt END,
    h.max_attempts, h.queue, h.kind, h.args,
    CASE WHEN h.err IS NULL THEN h.errors
      ELSE coalesce(h.errors, '[]'::jsonb) || jsonb_build_array(h.err || jsonb_build_object('at', now()))
    END,
    h.tags, h.metadata, h.unique_key, h.unique_states, h.output, h.flow_key,
    h.wait_kind, h.deps_left, h.has_dependents AND NOT h.final, h.workflow_id, h.workflow_task, h.batch_id
  FROM hit h
  RETURNING id, fence, state::text, queue, priority, run_at, coalesce(batch_id, 0)
),
-- The lease rows mark their jobs in hit done, or go with their last
-- (fragments/lease_done.sql).
{{lease_done}}
SELECT * FROM written
