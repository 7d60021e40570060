-- Jobs above the last id Listen saw, and the jobs of the ids below it that
-- the last looks found missing (Listen's gaps: an insert that took its id
-- first and committed after a higher one), at most ? of them, in id order.
-- The id list is appended.
SELECT id, queue FROM {{db}}.spool_jobs WHERE id > ? OR id IN
