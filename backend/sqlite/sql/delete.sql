-- Delete (?2 id; ?1, the time, is not needed) a job unless it is running.
DELETE FROM spool_jobs WHERE id = ?2 AND state NOT IN ('running', 'waiting') AND NOT has_dependents
RETURNING {{cols}}
