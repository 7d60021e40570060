SELECT d.parent_id, d.child_id, d.on_fail FROM spool_deps AS d
JOIN spool_jobs AS j ON j.id = d.child_id
WHERE j.workflow_id = ?1
