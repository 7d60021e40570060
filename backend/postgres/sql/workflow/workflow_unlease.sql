-- Moves the tasks of workflow $1 that lease rows hold back into
-- spool_jobs as running rows (spool_unlease), before a cancel or a retry
-- writes them in place. The lease rows are found by the span of their
-- ids over the workflow's range (its tasks' ids), then by the tasks they
-- hold.
WITH r AS (
  SELECT int8range(coalesce(first_id, 0), coalesce(last_id, 9223372036854775806), '[]') AS ids
  FROM {{s}}.spool_workflows WHERE id = $1
), t AS MATERIALIZED (
  SELECT l.id AS lease, j.id FROM {{s}}.spool_leases l CROSS JOIN LATERAL unnest(l.jobs) j
  WHERE l.span && (SELECT ids FROM r) AND j.workflow_id = $1 AND j.id <> ALL (l.done)
)
SELECT coalesce({{s}}.spool_unlease(ARRAY(SELECT DISTINCT lease FROM t), ARRAY(SELECT id FROM t)), 0)
