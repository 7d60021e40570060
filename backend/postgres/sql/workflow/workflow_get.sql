SELECT id, name, created_at, tasks FROM {{s}}.spool_workflows WHERE id = $1
