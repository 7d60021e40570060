-- Records gone: delete the steps and signals of the jobs $1 (completed
-- with durable records, their outcomes written) that no longer have a
-- row: deleted at their completion (CompletedRetention < 0). The delete
-- trigger (schema 21) fires only for rows deleted finished, and these were
-- deleted running or in their lease row. A job kept (a workflow's task,
-- kept until its workflow is final) keeps its records.
WITH gone AS MATERIALIZED (
  SELECT i.id FROM unnest($1::bigint[]) AS i(id)
  WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.id = i.id)
),
-- fragments/records_of_gone.sql
{{records_of_gone}}
SELECT count(*) FROM gone
