-- Bulk delete, one batch: the first $7 jobs above id $1 that match the
-- filters (queue $2, kind $3, states $4, created in ($5, $6)) are deleted,
-- except running and waiting jobs and jobs others wait on (has_dependents:
-- deleting one would leave its dependents waiting forever), as JobDelete
-- refuses them. Locked in id order and waited for, as in bulk_retry.sql.
WITH taken AS MATERIALIZED (
  SELECT id, false AS flag
  FROM {{s}}.spool_jobs
  WHERE id > $1 AND ($2 = '' OR queue = $2) AND ($3 = '' OR kind = $3)
    AND (cardinality($4::text[]) = 0 OR state::text = ANY($4::text[]))
    AND ($5::timestamptz IS NULL OR created_at > $5) AND ($6::timestamptz IS NULL OR created_at < $6)
    AND state NOT IN ('running', 'waiting') AND NOT has_dependents
  ORDER BY id
  LIMIT $7
  FOR UPDATE
), gone AS (
  DELETE FROM {{s}}.spool_jobs j
  USING taken t
  WHERE j.id = t.id
  RETURNING j.id
),
-- Their steps and signals go with them, as in delete.sql
-- (fragments/records_of_gone.sql).
{{records_of_gone}}
-- One row per job taken (every one taken is locked, so it is deleted).
SELECT id, false, true, ''::text, 0::smallint, NULL::timestamptz FROM gone
