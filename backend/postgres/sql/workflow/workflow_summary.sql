-- Each workflow's tasks counted by state, read over its range of ids
-- (schema 27) one workflow at a time (LATERAL): joined as a whole, the
-- planner read the whole table for a page of workflows. Its tasks in
-- lease rows (schema 28) are found by the span of the rows' ids over the
-- range, and counted as running.
WITH w AS (SELECT id, name, created_at, tasks, first_id, last_id FROM {{s}}.spool_workflows
  WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2)
SELECT w.id, w.name, w.created_at, w.tasks, coalesce(j.state, ''), coalesce(j.n, 0)
FROM w LEFT JOIN LATERAL (
  SELECT s.state, sum(s.n)::bigint AS n FROM (
    SELECT t.state::text AS state, count(*) AS n FROM {{s}}.spool_jobs t
    WHERE t.id BETWEEN coalesce(w.first_id, 0) AND coalesce(w.last_id, 9223372036854775806) AND t.workflow_id = w.id
    GROUP BY t.state
    UNION ALL
    SELECT 'running', count(*) FROM {{s}}.spool_leases l CROSS JOIN LATERAL unnest(l.jobs) k
    WHERE l.span && int8range(coalesce(w.first_id, 0), coalesce(w.last_id, 9223372036854775806), '[]')
      AND k.workflow_id = w.id AND k.id <> ALL (l.done)
    HAVING count(*) > 0
  ) s GROUP BY s.state
) j ON true
ORDER BY w.id DESC
