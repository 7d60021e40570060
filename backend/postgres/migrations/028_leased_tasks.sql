-- Workflow tasks in lease rows (schema 28). A claim used to keep every
-- job of a workflow in place, so a task was written three times as new
-- row versions of spool_jobs (made available, claimed, finished), each
-- with its index entries, where a plain job is deleted into a lease row
-- and inserted once when it finishes (BENCHMARKS.md, "Workflow tasks in
-- lease rows"). Tasks now take the lease rows' path too; batch members
-- still stay in place.
--
-- deps marks a lease row whose jobs all have dependents (the claim puts
-- jobs with and without dependents in separate rows): the plain leased
-- completions skip such rows by this flag alone, without reading their
-- jobs, and finish_deps_leased.sql writes them in the transaction that
-- settles their dependents.
ALTER TABLE {{schema}}.spool_leases ADD COLUMN deps boolean NOT NULL DEFAULT false;

-- A job moved back into spool_jobs keeps its workflow's and batch's
-- columns (schema 12 wrote only the columns it knew).
CREATE OR REPLACE FUNCTION {{schema}}.spool_unlease(leases bigint[], want bigint[]) RETURNS integer
LANGUAGE sql AS $$
WITH locked AS MATERIALIZED (
  SELECT l.id, l.leased_until, l.leased_by, l.claimed_at, l.epoch, l.done, l.ids, l.jobs
  FROM {{schema}}.spool_leases l WHERE l.id = ANY (leases) ORDER BY l.id FOR NO KEY UPDATE
), moving AS MATERIALIZED (
  SELECT l.id AS lease, l.leased_until AS lease_until, l.leased_by AS lease_by, l.claimed_at AS lease_at,
    l.epoch AS lease_epoch, j.*
  FROM locked l CROSS JOIN LATERAL unnest(l.jobs) j
  WHERE j.id <> ALL (l.done) AND (want IS NULL OR j.id = ANY (want))
), moved AS (
  INSERT INTO {{schema}}.spool_jobs (id, run_at, created_at, leased_until, attempted_at, finalized_at, fence, state,
    priority, attempt, max_attempts, queue, kind, leased_by, args, errors, tags, metadata, unique_key, unique_states,
    output, flow_key, wait_kind, deps_left, has_dependents, workflow_id, workflow_task, batch_id)
  SELECT m.id, m.run_at, m.created_at, m.lease_until, m.lease_at, NULL, {{schema}}.spool_next_fence(m.fence, m.lease_epoch),
    'running', m.priority, m.attempt + 1, m.max_attempts, m.queue, m.kind, m.lease_by, m.args, m.errors, m.tags,
    m.metadata, m.unique_key, m.unique_states, m.output, m.flow_key, m.wait_kind, m.deps_left, m.has_dependents,
    m.workflow_id, m.workflow_task, m.batch_id
  FROM moving m
  RETURNING id
), marks AS (
  SELECT lease, array_agg(id) AS ids FROM moving GROUP BY lease
), kept AS (
  UPDATE {{schema}}.spool_leases l SET done = l.done || m.ids
  FROM marks m JOIN locked k ON k.id = m.lease
  WHERE l.id = m.lease AND cardinality(k.done) + cardinality(m.ids) < cardinality(k.ids)
), gone AS (
  DELETE FROM {{schema}}.spool_leases l
  USING marks m JOIN locked k ON k.id = m.lease
  WHERE l.id = m.lease AND cardinality(k.done) + cardinality(m.ids) >= cardinality(k.ids)
)
SELECT count(*)::integer FROM moved
$$;

-- The view of leased jobs shows their workflow's columns (schema 20 gave
-- the defaults: no leased job was in a workflow).
CREATE OR REPLACE VIEW {{schema}}.spool_leased_jobs AS
SELECT j.id, j.run_at, j.created_at, l.leased_until, l.claimed_at AS attempted_at, NULL::timestamptz AS finalized_at,
  {{schema}}.spool_next_fence(j.fence, l.epoch) AS fence, 'running'::{{schema}}.spool_job_state AS state,
  j.priority, (j.attempt + 1)::smallint AS attempt, j.max_attempts, j.queue, j.kind, l.leased_by, j.args,
  j.errors, j.tags, j.metadata, j.unique_key, j.unique_states, j.output, j.flow_key,
  j.wait_kind, j.deps_left, j.has_dependents, j.workflow_id,
  j.workflow_task, j.batch_id, l.id AS lease
FROM {{schema}}.spool_leases l CROSS JOIN LATERAL unnest(l.jobs) j
WHERE j.id <> ALL (l.done);
