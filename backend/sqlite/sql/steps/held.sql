-- Held: the queue of the job ?1 while the lease (?1 id, ?2 fence) holds it.
SELECT queue FROM spool_jobs WHERE id = ?1 AND fence = ?2 AND state = 'running'
