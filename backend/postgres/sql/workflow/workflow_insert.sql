INSERT INTO {{s}}.spool_workflows (name, tasks) VALUES ($1, $2) RETURNING id
