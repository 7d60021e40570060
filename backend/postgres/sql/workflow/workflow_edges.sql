-- Each task's edges by the index of children: joined as a whole, the
-- planner read every edge of the store for one workflow.
SELECT d.parent_id, d.child_id, d.on_fail
FROM {{s}}.spool_jobs j
  CROSS JOIN LATERAL (SELECT parent_id, child_id, on_fail FROM {{s}}.spool_deps WHERE child_id = j.id OFFSET 0) d
WHERE j.workflow_id = $1 AND j.id BETWEEN (SELECT coalesce(first_id, 0) FROM {{s}}.spool_workflows WHERE id = $1)
  AND (SELECT coalesce(last_id, 9223372036854775807) FROM {{s}}.spool_workflows WHERE id = $1)
