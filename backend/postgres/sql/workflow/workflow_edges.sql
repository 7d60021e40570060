SELECT d.parent_id, d.child_id, d.on_fail FROM {{s}}.spool_deps d JOIN {{s}}.spool_jobs j ON j.id = d.child_id WHERE j.workflow_id = $1
