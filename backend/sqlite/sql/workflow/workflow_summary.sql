-- Workflows with their tasks' counts by state (one row per workflow and
-- state), newest first, ids below ?1 (0: any), at most ?2 workflows.
WITH w AS (SELECT id, name, created_at, tasks FROM spool_workflows
  WHERE ?1 = 0 OR id < ?1 ORDER BY id DESC LIMIT ?2)
SELECT w.id, w.name, w.created_at, w.tasks, coalesce(j.state, ''), count(j.id)
FROM w LEFT JOIN spool_jobs AS j ON j.workflow_id = w.id
GROUP BY w.id, j.state
ORDER BY w.id DESC
