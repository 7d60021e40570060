SELECT id, name, created_at, tasks FROM spool_workflows WHERE id = ?1
