SELECT p.id, coalesce(p.workflow_task, ''), p.state::text, p.output
FROM {{s}}.spool_deps d JOIN {{s}}.spool_jobs p ON p.id = d.parent_id
WHERE d.child_id = $1 ORDER BY p.id
