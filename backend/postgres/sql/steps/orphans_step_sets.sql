-- Orphaned step sets (schema 25): the records of up to $2 jobs above job
-- id $1 that have neither a row nor a lease row, deleted. Records outlive
-- their job where no write deleted them with it: a process that died
-- between a completion that deleted its job and records_gone.sql. One
-- statement, one snapshot: a job moving between spool_jobs and a lease
-- row is seen in one of them.
-- Returns the highest job id looked at and how many jobs were looked at
-- (fewer than $2: the next sweep starts over).
WITH ids AS MATERIALIZED (
  SELECT DISTINCT job_id FROM {{s}}.spool_step_sets WHERE job_id > $1 ORDER BY job_id LIMIT $2
), orphan AS (
  SELECT i.job_id FROM ids i
  WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.id = i.job_id)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_leases l WHERE l.span @> i.job_id AND l.ids @> ARRAY[i.job_id])
), gone AS (
  DELETE FROM {{s}}.spool_step_sets t USING orphan o WHERE t.job_id = o.job_id
)
SELECT coalesce(max(job_id), 0), count(*) FROM ids
