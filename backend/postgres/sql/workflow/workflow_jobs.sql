-- A workflow's tasks: the primary key over its range of ids (schema 27),
-- and those of them in lease rows (schema 28), found by the span of the
-- rows' ids over the range.
WITH r AS MATERIALIZED (
  SELECT coalesce(first_id, 0) AS lo, coalesce(last_id, 9223372036854775806) AS hi
  FROM {{s}}.spool_workflows WHERE id = $1
)
SELECT {{cols}} FROM {{s}}.spool_jobs
WHERE workflow_id = $1 AND id BETWEEN (SELECT lo FROM r) AND (SELECT hi FROM r)
UNION ALL
SELECT {{cols}} FROM {{s}}.spool_leased_jobs
WHERE workflow_id = $1 AND lease = ANY (ARRAY(SELECT l.id FROM {{s}}.spool_leases l
  WHERE l.span && (SELECT int8range(lo, hi, '[]') FROM r)))
ORDER BY id
