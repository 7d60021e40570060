-- A workflow's tasks: the primary key over its range of ids (schema 27).
SELECT {{cols}} FROM {{s}}.spool_jobs
WHERE workflow_id = $1 AND id BETWEEN (SELECT coalesce(first_id, 0) FROM {{s}}.spool_workflows WHERE id = $1)
  AND (SELECT coalesce(last_id, 9223372036854775807) FROM {{s}}.spool_workflows WHERE id = $1)
ORDER BY id
