SELECT {{cols}} FROM spool_jobs WHERE workflow_id = ?1 ORDER BY id
