-- Orphaned records: the steps, step sets and signals of the first $2 jobs
-- above job id $1 that have records, deleted where the job has neither a
-- row nor a lease row. Records outlive their job where no write deleted
-- them with it: a job that received a signal but never waited, deleted at
-- its completion (records_gone.sql takes only runs with durable records),
-- or a process that died between a completion that deleted its job and
-- records_gone.sql. Each table gives its first $2 distinct jobs from its
-- primary key, so their union's first $2 are the first $2 of all three.
-- One statement, one snapshot: a job moving between spool_jobs and a lease
-- row is seen in one of them. Returns the highest job id looked at and how
-- many jobs were looked at (fewer than $2: the next sweep starts over).
WITH ids AS MATERIALIZED (
  SELECT job_id FROM (
    (SELECT DISTINCT job_id FROM {{s}}.spool_steps WHERE job_id > $1 ORDER BY job_id LIMIT $2)
    UNION
    (SELECT DISTINCT job_id FROM {{s}}.spool_step_sets WHERE job_id > $1 ORDER BY job_id LIMIT $2)
    UNION
    (SELECT DISTINCT job_id FROM {{s}}.spool_signals WHERE job_id > $1 ORDER BY job_id LIMIT $2)
  ) r
  ORDER BY job_id LIMIT $2
), gone AS (
  SELECT i.job_id AS id FROM ids i
  WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.id = i.job_id)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_leases l WHERE l.span @> i.job_id AND l.ids @> ARRAY[i.job_id])
),
-- fragments/records_of_gone.sql
{{records_of_gone}}
SELECT coalesce(max(job_id), 0), count(*) FROM ids
