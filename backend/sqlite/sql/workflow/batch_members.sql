-- New members of batch ?2 (ids in ?1, a JSON array) and their total; a
-- callback (?3: waiting, deps_left 1) carries the batch id without being
-- a member.
UPDATE spool_jobs SET batch_id = ?2,
  has_dependents = NOT ?3,
  state = CASE WHEN ?3 THEN 'waiting' ELSE state END,
  wait_kind = CASE WHEN ?3 THEN 'deps' END,
  deps_left = CASE WHEN ?3 THEN 1 ELSE 0 END
WHERE id IN (SELECT value FROM json_each(?1))
