-- Dependents that another settle may also write (parents left beyond the
-- ones settled here: a fan-in) are locked in id order first, so that two
-- finishes settling parents with shared dependents wait for each other
-- instead of deadlocking. A dependent whose every remaining parent is
-- settled here has no other settling writer: it skips that pass and its
-- lock record, and is updated in id order all the same (the nested loop
-- over todo), as the lock pass would have locked it. A
-- released dependent is due from now at the latest, so it lands above
-- every claim floor. Each parent's edges and each dependent are read by
-- index (the LATERAL with OFFSET 0, the id arrays): joined to the input as
-- the planner first chose, every settle read the whole edge table (220 µs
-- of server time a task in a drain of 100-wide workflows).
WITH p AS (SELECT * FROM unnest($1::bigint[], $2::boolean[]) AS t(id, ok)),
e AS MATERIALIZED (
  SELECT d.child_id AS cid, count(*)::integer AS n, bool_or(NOT p.ok AND d.on_fail = 0) AS fail
  FROM p CROSS JOIN LATERAL (SELECT child_id, on_fail FROM {{s}}.spool_deps WHERE parent_id = p.id OFFSET 0) d
  GROUP BY d.child_id
),
-- deps_left under the statement's snapshot: a parent settled by a
-- transaction still open is counted in it, so its dependent reads as
-- shared and takes the lock pass.
cur AS MATERIALIZED (
  SELECT c.id, c.tid, c.deps_left > e.n AS shared
  FROM (SELECT id, ctid AS tid, deps_left FROM {{s}}.spool_jobs
        WHERE id = ANY (ARRAY(SELECT cid FROM e)) AND state = 'waiting' OFFSET 0) c
  JOIN e ON e.cid = c.id
),
locked AS MATERIALIZED (
  SELECT c.id, c.ctid AS tid FROM {{s}}.spool_jobs c
  WHERE c.id = ANY (ARRAY(SELECT id FROM cur WHERE shared)) AND c.state = 'waiting'
  ORDER BY c.id FOR UPDATE
),
todo AS MATERIALIZED (
  SELECT e.cid, e.n, e.fail, u.tid
  FROM (SELECT id, tid FROM locked UNION ALL SELECT id, tid FROM cur WHERE NOT shared) u
  JOIN e ON e.cid = u.id
  ORDER BY e.cid
),
-- The rows are updated by their tuple ids (a TID lookup each, as the
-- claim deletes its rows), not looked up by id again: a fan-out of
-- 100,000 dependents spent a fifth of its settle on that lookup
-- (BENCHMARKS.md, "Workflow tasks in lease rows"). A row changed after
-- the snapshot (a locked one in its latest version, an unlocked one by a
-- cancel that committed since) is not at its tuple id any more: late
-- updates those by id, and only when moved fell short (a row moved
-- updated, late's update skips; one no longer waiting is left alone).
moved AS (
  UPDATE {{s}}.spool_jobs c SET {{settle_set}}
  FROM todo e
  WHERE c.ctid = e.tid AND c.id = e.cid
  RETURNING c.id, c.state::text, c.queue, c.priority, c.run_at
),
late AS (
  UPDATE {{s}}.spool_jobs c SET {{settle_set}}
  FROM e
  WHERE c.id = ANY (ARRAY(SELECT cid FROM todo)) AND c.id = e.cid AND c.state = 'waiting'
    AND (SELECT count(*) FROM moved) < (SELECT count(*) FROM todo)
  RETURNING c.id, c.state::text, c.queue, c.priority, c.run_at
)
SELECT * FROM moved UNION ALL SELECT * FROM late
