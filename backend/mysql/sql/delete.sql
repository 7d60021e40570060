-- Delete one job unless it is running (JobDelete reads it first, under a
-- row lock, to tell a running job from a missing one).
DELETE FROM {{db}}.spool_jobs WHERE id = ? AND state NOT IN ('running', 'waiting') AND has_dependents = 0
