WITH w AS (SELECT id, name, created_at, tasks, first_id, last_id FROM {{s}}.spool_workflows
  WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2)
SELECT w.id, w.name, w.created_at, w.tasks, coalesce(j.state::text, ''), count(j.id)
FROM w LEFT JOIN {{s}}.spool_jobs j ON j.workflow_id = w.id
  AND j.id BETWEEN coalesce(w.first_id, 0) AND coalesce(w.last_id, 9223372036854775807)
GROUP BY w.id, w.name, w.created_at, w.tasks, j.state
ORDER BY w.id DESC
