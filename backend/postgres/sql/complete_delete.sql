-- Complete: the finish of a batch whose outcomes are all successes,
-- the common case, without finish's per-row CASEs and its second
-- data-modifying CTE. Same guard, same result rows.
DELETE FROM {{s}}.spool_jobs j
USING unnest($1::bigint[], $2::integer[]) AS i(id, fence)
WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running' AND NOT j.has_dependents
RETURNING j.id, j.fence
