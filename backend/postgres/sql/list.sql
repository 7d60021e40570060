-- List: the head of a job list, jobs by id after $1 (keyset paging);
-- JobList appends the filters given (sqlfilter.List: the states as
-- literals, so that the planner can match the partial indexes), the order
-- and the limit.
SELECT {{cols}} FROM {{s}}.spool_jobs WHERE id > $1
