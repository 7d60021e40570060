-- List: the head of a job list; JobList appends the filters given, with
-- the states written as literals (so that the planner can match the
-- partial indexes: running jobs from spool_jobs_running, pending ones
-- from spool_jobs_pending), the order and the limit.
SELECT {{cols}} FROM {{s}}.spool_jobs WHERE true
