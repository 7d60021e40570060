-- Finish plain completions, deleting (DeleteCompleted): the leases are the
-- VALUES rows (id, fence) bound from ?2 on, {{pairs}} being as many as the
-- batch's size bucket (finish.go pads a batch with its first lease); ?1,
-- the time, is not needed. Each row is guarded by (id, fence, running).
DELETE FROM spool_jobs WHERE id IN (
  SELECT j.id FROM (VALUES {{pairs}}) AS v JOIN spool_jobs AS j ON j.id = v.column1
  WHERE j.fence = v.column2 AND j.state = 'running' AND NOT j.has_dependents
)
RETURNING id, fence
