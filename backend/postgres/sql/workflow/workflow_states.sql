-- The states of workflow $1's tasks, locked in id order (the order every
-- write of several tasks locks them in).
SELECT id, state::text FROM {{s}}.spool_jobs
WHERE workflow_id = $1 AND id BETWEEN (SELECT coalesce(first_id, 0) FROM {{s}}.spool_workflows WHERE id = $1)
  AND (SELECT coalesce(last_id, 9223372036854775807) FROM {{s}}.spool_workflows WHERE id = $1)
ORDER BY id FOR UPDATE
