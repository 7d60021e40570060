-- Dependents are locked in id order first, so that two finishes
-- settling parents with shared dependents wait for each other instead
-- of deadlocking. A released dependent is due from now at the latest,
-- so it lands above every claim floor. Each parent's edges and each
-- dependent are read by index (the LATERAL with OFFSET 0, the
-- id arrays): joined to the input as the planner first chose, every
-- settle read the whole edge table (220 µs of server time a task in a
-- drain of 100-wide workflows).
WITH p AS (SELECT * FROM unnest($1::bigint[], $2::boolean[]) AS t(id, ok)),
e AS MATERIALIZED (
  SELECT d.child_id AS cid, count(*)::integer AS n, bool_or(NOT p.ok AND d.on_fail = 0) AS fail
  FROM p CROSS JOIN LATERAL (SELECT child_id, on_fail FROM {{s}}.spool_deps WHERE parent_id = p.id OFFSET 0) d
  GROUP BY d.child_id
),
locked AS MATERIALIZED (
  SELECT c.id, c.ctid AS tid FROM {{s}}.spool_jobs c WHERE c.id = ANY (ARRAY(SELECT cid FROM e)) AND c.state = 'waiting'
  ORDER BY c.id FOR UPDATE
),
-- The locked rows are updated by the tuple ids their locks returned (one
-- TID scan, as the claim deletes its rows), not looked up by id a second
-- time: a fan-out of 100,000 dependents spent a fifth of its settle on
-- that lookup (BENCHMARKS.md, "Workflow tasks in lease rows"). A row
-- changed after this statement's snapshot and before the lock reached it
-- is locked in its latest version, which a TID scan under the snapshot
-- does not see: late updates those by id, and only when moved fell short
-- (a row moved updated, late's update skips).
moved AS (
  UPDATE {{s}}.spool_jobs c SET {{settle_set}}
  FROM e
  WHERE c.ctid = ANY (ARRAY(SELECT tid FROM locked)) AND c.id = e.cid
  RETURNING c.id, c.state::text, c.queue, c.priority, c.run_at
),
late AS (
  UPDATE {{s}}.spool_jobs c SET {{settle_set}}
  FROM e
  WHERE c.id = ANY (ARRAY(SELECT id FROM locked)) AND c.id = e.cid
    AND (SELECT count(*) FROM moved) < (SELECT count(*) FROM locked)
  RETURNING c.id, c.state::text, c.queue, c.priority, c.run_at
)
SELECT * FROM moved UNION ALL SELECT * FROM late
