-- Each workflow's tasks counted by state, read over its range of ids
-- (schema 27) one workflow at a time (LATERAL): joined as a whole, the
-- planner read the whole table for a page of workflows.
WITH w AS (SELECT id, name, created_at, tasks, first_id, last_id FROM {{s}}.spool_workflows
  WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2)
SELECT w.id, w.name, w.created_at, w.tasks, coalesce(j.state, ''), coalesce(j.n, 0)
FROM w LEFT JOIN LATERAL (
  SELECT t.state::text AS state, count(*) AS n FROM {{s}}.spool_jobs t
  WHERE t.id BETWEEN coalesce(w.first_id, 0) AND coalesce(w.last_id, 9223372036854775807) AND t.workflow_id = w.id
  GROUP BY t.state
) j ON true
ORDER BY w.id DESC
