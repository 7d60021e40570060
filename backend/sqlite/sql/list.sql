-- List: the head of a job list, jobs by id after ? (keyset paging); the
-- filters, the order and the limit follow (sqlfilter.List).
SELECT {{cols}} FROM spool_jobs WHERE id > ?
