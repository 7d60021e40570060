-- The tasks of ?1 (a JSON array of [id, task, deps, has_dependents])
-- join workflow ?2; a task with dependencies waits.
UPDATE spool_jobs AS j SET
  workflow_id = ?2,
  workflow_task = t.value->>1,
  deps_left = t.value->>2,
  has_dependents = t.value->>3,
  state = CASE WHEN t.value->>2 > 0 THEN 'waiting' ELSE j.state END,
  wait_kind = CASE WHEN t.value->>2 > 0 THEN 'deps' END
FROM json_each(?1) AS t
WHERE j.id = t.value->>0
