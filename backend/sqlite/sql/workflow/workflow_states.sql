-- The states of workflow ?1's tasks.
SELECT id, state FROM spool_jobs WHERE workflow_id = ?1 ORDER BY id
