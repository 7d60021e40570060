-- The dependencies of job $1 with their states and outputs: in place, or
-- in a lease row (schema 28: a task run again by JobRetry while its
-- dependent runs). The lease rows are found first, by the span of their
-- ids, so that only their jobs are read.
SELECT p.id, coalesce(p.workflow_task, ''), p.state::text, p.output
FROM {{s}}.spool_deps d JOIN {{s}}.spool_jobs p ON p.id = d.parent_id
WHERE d.child_id = $1
UNION ALL
SELECT v.id, coalesce(v.workflow_task, ''), v.state::text, v.output
FROM {{s}}.spool_leased_jobs v
WHERE v.lease = ANY (ARRAY(SELECT l.id FROM {{s}}.spool_deps d JOIN {{s}}.spool_leases l
    ON l.span @> d.parent_id AND l.ids @> ARRAY[d.parent_id]
  WHERE d.child_id = $1))
  AND v.id IN (SELECT parent_id FROM {{s}}.spool_deps WHERE child_id = $1)
ORDER BY 1
