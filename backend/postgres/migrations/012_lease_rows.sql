-- Lease rows (schema 12): a claim moves its batch out of spool_jobs into
-- rows of spool_leases, up to 64 jobs a row, instead of updating each
-- job's row. A job then costs one removal from spool_jobs when claimed and
-- one inserted row when it finishes (its finished row, or its pending row
-- for a retry), where an update in place cost a new row version and new
-- index entries at each step (docs/storage.md has the measurements).
--
-- A lease row keeps its jobs as they were before the claim (jobs, in
-- spool_jobs' own row type) and what the claim changed for all of them:
-- the lease's holder, end and start, and the epoch their fences were
-- given in. A job's running form is derived: attempt + 1, fence
-- spool_next_fence(fence, epoch) (kept in fences, for heartbeats that need
-- no more), state running. done lists the jobs of the row that have left
-- it (finished, or moved back into spool_jobs); the row goes when every
-- job has. Jobs with a unique key or a flow key are still claimed in
-- place: their keys must stay visible to spool_jobs' indexes while they
-- run.
CREATE TABLE {{schema}}.spool_leases (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue        text NOT NULL,
  leased_by    text NOT NULL,
  leased_until timestamptz NOT NULL,
  claimed_at   timestamptz NOT NULL,
  epoch        integer NOT NULL,
  ids          bigint[] NOT NULL,
  fences       integer[] NOT NULL,
  done         bigint[] NOT NULL DEFAULT '{}',
  jobs         {{schema}}.spool_jobs[] NOT NULL,
  CONSTRAINT spool_leases_sizes CHECK (cardinality(ids) = cardinality(fences) AND cardinality(ids) = cardinality(jobs))
) WITH (fillfactor = 50);

-- Finishes, heartbeats and reads of one job find its lease row by id.
-- Neither indexed column ever changes, so a heartbeat's or a finish's
-- update of a lease row can stay on its page (fillfactor 50) without new
-- index entries.
CREATE INDEX spool_leases_ids ON {{schema}}.spool_leases USING gin (ids);
-- Flow-controlled claims count a queue's running jobs, these included.
CREATE INDEX spool_leases_queue ON {{schema}}.spool_leases (queue);

-- spool_leased_jobs: the running jobs held in lease rows, with the columns
-- of spool_jobs in its order, and the lease row's id.
CREATE VIEW {{schema}}.spool_leased_jobs AS
SELECT j.id, j.run_at, j.created_at, l.leased_until, l.claimed_at AS attempted_at, NULL::timestamptz AS finalized_at,
  {{schema}}.spool_next_fence(j.fence, l.epoch) AS fence, 'running'::{{schema}}.spool_job_state AS state,
  j.priority, (j.attempt + 1)::smallint AS attempt, j.max_attempts, j.queue, j.kind, l.leased_by, j.args,
  j.errors, j.tags, j.metadata, j.unique_key, j.unique_states, j.output, j.flow_key, l.id AS lease
FROM {{schema}}.spool_leases l CROSS JOIN LATERAL unnest(l.jobs) j
WHERE j.id <> ALL (l.done);

-- spool_outcome_state is the state an outcome (backend.Outcome: 1
-- complete, 2 retry, 3 snooze, 4 cancel, 5 discard, 6 release) gives a
-- running job at attempt of max_attempts, for both finish statements.
-- Written as one SQL expression of constants, so PostgreSQL inlines it.
CREATE FUNCTION {{schema}}.spool_outcome_state(outcome smallint, attempt integer, max_attempts integer, delay_us bigint)
RETURNS {{schema}}.spool_job_state LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN outcome = 1 THEN 'completed'::{{schema}}.spool_job_state
    WHEN outcome = 2 AND attempt >= max_attempts THEN 'discarded'::{{schema}}.spool_job_state
    WHEN outcome = 2 THEN 'retryable'::{{schema}}.spool_job_state
    WHEN outcome = 3 AND delay_us > 0 THEN 'scheduled'::{{schema}}.spool_job_state
    WHEN outcome = 4 THEN 'cancelled'::{{schema}}.spool_job_state
    WHEN outcome = 5 THEN 'discarded'::{{schema}}.spool_job_state
    ELSE 'available'::{{schema}}.spool_job_state
  END
$$;

-- spool_unlease moves the jobs of the lease rows leases that are still in
-- them (only those among want, unless want is NULL) back into spool_jobs
-- as running rows, with the same fence and lease. Whoever holds them goes
-- on: finishes and heartbeats look in both places. Used before an
-- operation on running jobs (cancel, record, release, rescue). It reads
-- the lease rows as it locks them, not as the statement's snapshot saw
-- them, so a job finished meanwhile is not moved back.
CREATE FUNCTION {{schema}}.spool_unlease(leases bigint[], want bigint[]) RETURNS integer
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
    output, flow_key)
  SELECT m.id, m.run_at, m.created_at, m.lease_until, m.lease_at, NULL, {{schema}}.spool_next_fence(m.fence, m.lease_epoch),
    'running', m.priority, m.attempt + 1, m.max_attempts, m.queue, m.kind, m.lease_by, m.args, m.errors, m.tags,
    m.metadata, m.unique_key, m.unique_states, m.output, m.flow_key
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
