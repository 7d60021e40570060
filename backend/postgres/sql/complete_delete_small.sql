-- Complete, small form, deleting: complete_delete.sql for a batch of at
-- most genericPlanMax jobs with distinct ids, reaching spool_jobs only
-- through its primary key on a cached generic plan (complete_keep_small.sql
-- says why).
DELETE FROM {{s}}.spool_jobs j
WHERE j.id = ANY($1::bigint[]) AND j.state::text = 'running' AND NOT j.has_dependents
  AND j.fence = ($2::integer[])[array_position($1::bigint[], j.id)]
RETURNING j.id, j.fence
