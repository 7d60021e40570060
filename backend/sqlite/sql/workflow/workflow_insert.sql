INSERT INTO spool_workflows (name, created_at, tasks) VALUES (?1, ?2, ?3) RETURNING id
