-- Cleanup, second step: delete the rows cleanup_select.sql read, by
-- primary key (locking each row before its index entries, as finishes
-- do), checking the same conditions again under the row's lock: a job
-- retried since, or a workflow or batch no longer final, is kept. The
-- multiple-table form is the one that takes an index hint: the id list,
-- not a range of spool_jobs_finalized, must drive the delete. Params:
-- those of {{cleanup_due}}; the id list, in ascending order, is
-- appended.
DELETE j FROM {{db}}.spool_jobs j FORCE INDEX (PRIMARY)
WHERE {{cleanup_due}}
  AND j.id IN 
