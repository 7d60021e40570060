-- Every other outcome, as one single-table UPDATE: the SET list is
-- built per batch by finishOtherSet (CASE expressions over the ids,
-- error texts bound) and "AND id IN (…)" is appended. A multiple-table
-- UPDATE joined to a derived table of the outcomes would need a
-- temporary table whenever the optimizer reads the derived table first,
-- and MariaDB 10.11.19 was seen to crash (signal 11 in
-- Create_tmp_table::cleanup_on_failure) when creating that table failed
-- under load; a single-table UPDATE never creates one.
UPDATE {{db}}.spool_jobs SET {{set}}
WHERE state = 'running' AND id IN 
