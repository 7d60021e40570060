-- After a cleanup round: edges whose child is gone, workflows with no
-- task left, finished batches with no job left.
DELETE FROM spool_deps WHERE NOT EXISTS (SELECT 1 FROM spool_jobs WHERE id = spool_deps.child_id);
DELETE FROM spool_workflows WHERE NOT EXISTS (SELECT 1 FROM spool_jobs WHERE workflow_id = spool_workflows.id);
DELETE FROM spool_batches WHERE finished_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM spool_jobs WHERE batch_id = spool_batches.id)
