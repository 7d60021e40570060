-- The state of one job, read before a change.
SELECT state FROM spool_jobs WHERE id = ?
