-- Job queue: the queue of the job ?1.
SELECT queue FROM spool_jobs WHERE id = ?1
