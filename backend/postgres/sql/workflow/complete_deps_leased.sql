-- finish_deps_leased.sql when every outcome of the batch is a completion
-- without an error ($1 ids, $2 fences), the common finish of a drain of
-- workflow tasks: the same lock and rule, the same rows written back with
-- every workflow column and the flag cleared (a completed job is final:
-- this transaction settles it), without the per-row choices of outcome,
-- delay and error, as complete_leased_keep.sql is to finish_leased.sql.
-- Returns what finish_deps_leased.sql returns.
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t(id, fence)
),
-- locked: the lease rows holding any of $1, locked
-- (fragments/leased_locked.sql).
{{leased_locked}},
-- hit: the jobs of $1 in rows flagged deps, under their fences. Each
-- row's jobs are joined with the input as they are unnested, so that only
-- the batch's jobs are kept, not every job still in the rows, as
-- fragments/leased_jobs.sql keeps them: a batch of workflow tasks often
-- finishes part of a lease row, the rest coming in the other settle
-- writer's batches (BENCHMARKS.md, "A DAG task's completion against a
-- plain job's").
hit AS MATERIALIZED (
  SELECT l.id AS lease, l.claimed_at AS lease_at, i.fence AS run_fence, j.attempt + 1 AS run_attempt, j.*
  FROM locked l CROSS JOIN LATERAL unnest(l.jobs) WITH ORDINALITY AS j
  JOIN input i ON i.id = j.id AND i.fence = l.fences[j.ordinality]
  WHERE l.deps AND j.id <> ALL (l.done)
),
written AS (
  INSERT INTO {{s}}.spool_jobs (id, run_at, created_at, attempted_at, finalized_at, fence, state, priority, attempt,
    max_attempts, queue, kind, args, errors, tags, metadata, unique_key, unique_states, output, flow_key,
    wait_kind, deps_left, has_dependents, workflow_id, workflow_task, batch_id)
  SELECT h.id, h.run_at, h.created_at, h.lease_at, now(), h.run_fence, 'completed', h.priority, h.run_attempt,
    h.max_attempts, h.queue, h.kind, h.args, h.errors, h.tags, h.metadata, h.unique_key, h.unique_states, h.output,
    h.flow_key, h.wait_kind, h.deps_left, false, h.workflow_id, h.workflow_task, h.batch_id
  FROM hit h
),
-- The lease rows mark their jobs in hit done, or go with their last
-- (fragments/lease_done.sql).
{{lease_done}}
SELECT id, run_fence, 'completed', queue, priority, run_at, coalesce(batch_id, 0) FROM hit
