-- Workflows and batches (docs/workflows.md): the state waiting, the
-- columns of a job that waits or is waited for, the edges, the workflows'
-- and batches' records.
--
-- A waiting job (wait_kind 'deps', deps_left > 0) is outside the pending
-- index and every claim, which read only available, scheduled and
-- retryable rows. has_dependents flags a job whose final state others
-- wait for, until its finish has settled them. Migrations run in one
-- transaction, where a value added to an enum cannot be used: nothing
-- below names 'waiting'.
ALTER TYPE {{schema}}.spool_job_state ADD VALUE IF NOT EXISTS 'waiting';

-- PostgreSQL adds no column to a table whose row type another table's
-- column holds (spool_leases.jobs, schema 12). The lease rows' jobs are
-- held as text while the columns are added, then read back into the
-- wider row type, each job with the new columns' defaults: a leased job
-- is in no workflow or batch. The view over them goes first and comes
-- back with the new columns.
DROP VIEW {{schema}}.spool_leased_jobs;
ALTER TABLE {{schema}}.spool_leases ALTER COLUMN jobs TYPE text[] USING jobs::text[];

ALTER TABLE {{schema}}.spool_jobs
  ADD COLUMN wait_kind text,
  ADD COLUMN deps_left integer NOT NULL DEFAULT 0,
  ADD COLUMN has_dependents boolean NOT NULL DEFAULT false,
  ADD COLUMN workflow_id bigint,
  ADD COLUMN workflow_task text,
  ADD COLUMN batch_id bigint;

-- A job's text form ends with ')': the six new fields go before it.
CREATE FUNCTION {{schema}}.spool_widen_jobs(old text[]) RETURNS {{schema}}.spool_jobs[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg((left(e, -1) || ',,0,f,,,)')::{{schema}}.spool_jobs ORDER BY o), '{}')
  FROM unnest(old) WITH ORDINALITY AS u(e, o)
$$;
ALTER TABLE {{schema}}.spool_leases ALTER COLUMN jobs TYPE {{schema}}.spool_jobs[] USING {{schema}}.spool_widen_jobs(jobs);
DROP FUNCTION {{schema}}.spool_widen_jobs(text[]);
-- A new column type takes the default compression: lz4 again, as schema
-- 16 set it.
DO $$
BEGIN
  IF current_setting('server_version_num')::integer >= 140000 THEN
    BEGIN
      EXECUTE 'ALTER TABLE {{schema}}.spool_leases ALTER COLUMN jobs SET COMPRESSION lz4';
    EXCEPTION WHEN feature_not_supported THEN
      NULL;
    END;
  END IF;
END
$$;

CREATE INDEX spool_jobs_workflow ON {{schema}}.spool_jobs (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX spool_jobs_batch ON {{schema}}.spool_jobs (batch_id, id) WHERE batch_id IS NOT NULL;
-- The leader's sweep finds jobs a cancel or a rescue finished without
-- settling their dependents.
CREATE INDEX spool_jobs_unsettled ON {{schema}}.spool_jobs (id) WHERE has_dependents;

-- The view of leased jobs gains the columns, in spool_jobs' order; a
-- leased job is in no workflow or batch.
CREATE VIEW {{schema}}.spool_leased_jobs AS
SELECT j.id, j.run_at, j.created_at, l.leased_until, l.claimed_at AS attempted_at, NULL::timestamptz AS finalized_at,
  {{schema}}.spool_next_fence(j.fence, l.epoch) AS fence, 'running'::{{schema}}.spool_job_state AS state,
  j.priority, (j.attempt + 1)::smallint AS attempt, j.max_attempts, j.queue, j.kind, l.leased_by, j.args,
  j.errors, j.tags, j.metadata, j.unique_key, j.unique_states, j.output, j.flow_key,
  NULL::text AS wait_kind, 0 AS deps_left, false AS has_dependents, NULL::bigint AS workflow_id,
  NULL::text AS workflow_task, NULL::bigint AS batch_id, l.id AS lease
FROM {{schema}}.spool_leases l CROSS JOIN LATERAL unnest(l.jobs) j
WHERE j.id <> ALL (l.done);

CREATE TABLE {{schema}}.spool_deps (
  parent_id bigint NOT NULL,
  child_id  bigint NOT NULL,
  on_fail   smallint NOT NULL DEFAULT 0, -- 0 cancel the child, 1 count as done
  PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX spool_deps_child ON {{schema}}.spool_deps (child_id);

CREATE TABLE {{schema}}.spool_workflows (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  tasks      integer NOT NULL
);

CREATE TABLE {{schema}}.spool_batches (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  sealed      boolean NOT NULL,
  total       integer NOT NULL DEFAULT 0,
  completed   integer NOT NULL DEFAULT 0,
  discarded   integer NOT NULL DEFAULT 0,
  cancelled   integer NOT NULL DEFAULT 0,
  finished_at timestamptz,
  on_success  bigint,
  on_failure  bigint,
  on_complete bigint
);
