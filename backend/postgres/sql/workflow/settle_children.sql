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
  SELECT c.id FROM {{s}}.spool_jobs c WHERE c.id = ANY (ARRAY(SELECT cid FROM e)) AND c.state = 'waiting'
  ORDER BY c.id FOR UPDATE
)
UPDATE {{s}}.spool_jobs c SET
  deps_left = c.deps_left - e.n,
  state = (CASE WHEN e.fail THEN 'cancelled' WHEN c.deps_left - e.n > 0 THEN 'waiting'
    WHEN c.run_at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state,
  run_at = CASE WHEN NOT e.fail AND c.deps_left - e.n <= 0 THEN greatest(c.run_at, now()) ELSE c.run_at END,
  wait_kind = CASE WHEN e.fail OR c.deps_left - e.n <= 0 THEN NULL ELSE c.wait_kind END,
  finalized_at = CASE WHEN e.fail THEN now() END,
  errors = CASE WHEN e.fail THEN coalesce(c.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', c.attempt, 'at', now(), 'error', 'cancelled: a dependency ended discarded or cancelled'))
    ELSE c.errors END
FROM e
WHERE c.id = ANY (ARRAY(SELECT id FROM locked)) AND c.id = e.cid
RETURNING c.id, c.state::text, c.queue, c.priority, c.run_at
