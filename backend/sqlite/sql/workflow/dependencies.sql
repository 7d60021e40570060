SELECT p.id, coalesce(p.workflow_task, ''), p.state, p.output
FROM spool_deps AS d JOIN spool_jobs AS p ON p.id = d.parent_id
WHERE d.child_id = ?1
ORDER BY p.id
