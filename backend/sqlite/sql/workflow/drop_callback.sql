-- A callback whose condition did not hold is deleted, and its batch no
-- longer names it.
DELETE FROM spool_jobs WHERE id = ?1 AND state = 'waiting'
