-- Whether a job exists, to tell "no such job" from "not allowed in its
-- state" when a change matched nothing.
SELECT 1 FROM spool_jobs WHERE id = ?
