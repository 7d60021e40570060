-- List: the head of a job list, jobs by id after $1 (keyset paging);
-- JobList appends the filters given (sqlfilter.List: the states as
-- literals, so that the planner can match the partial indexes), the order
-- and the limit. Running jobs held in lease rows (schema 12) are listed
-- with the rest.
SELECT {{cols}} FROM (
  SELECT {{allcols}} FROM {{s}}.spool_jobs
  UNION ALL
  SELECT {{allcols}} FROM {{s}}.spool_leased_jobs
) j WHERE id > $1
