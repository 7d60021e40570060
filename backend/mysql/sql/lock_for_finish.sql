-- Finish, in one transaction: lock the batch's rows by primary key
-- (ascending: the IN list is scanned in order) and read their lease,
-- so the backend knows exactly which outcomes apply before writing.
-- The id list and " FOR UPDATE" are appended.
SELECT id, fence, state, has_dependents FROM {{db}}.spool_jobs WHERE id IN 
