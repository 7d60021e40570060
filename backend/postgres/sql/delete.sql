-- Delete one job unless it is running (a running job is cancelled first,
-- so that its holder learns of it). Its steps and signals go with it: the
-- delete trigger (schema 21) fires only for jobs deleted finished, and a
-- pending job can hold signals sent before it waited, and a retried one
-- the steps of its earlier attempts.
WITH gone AS (
  DELETE FROM {{s}}.spool_jobs j
  WHERE j.id = $1 AND j.state NOT IN ('running', 'waiting') AND NOT j.has_dependents
  RETURNING {{jcols}}
),
-- fragments/records_of_gone.sql
{{records_of_gone}}
SELECT * FROM gone
