-- Get: one job by id.
SELECT {{cols}} FROM spool_jobs WHERE id = ?
