-- Finish plain completions, deleting (DeleteCompleted): the leases of one
-- fence ?2, their ids bound from ?3 on, {{ids}} being as many as the batch's
-- size bucket (finish.go pads a chunk with its first id); ?1, the time, is
-- not needed. A rowid IN list keeps the plan on the primary key whatever the
-- statistics say (a join against VALUES rows was planned the other way
-- round once ANALYZE had run, ten times the cost). Each row is guarded by
-- (id, fence, running). finish.go also runs it without its last line,
-- counting the rows it changed instead (completes.run); keep RETURNING id
-- last.
DELETE FROM spool_jobs
WHERE id IN ({{ids}}) AND fence = ?2 AND state = 'running' AND NOT has_dependents
RETURNING id
