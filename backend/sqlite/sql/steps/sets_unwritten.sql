-- Sets unwritten: the positions in ?1, a JSON array of [id, fence, first
-- name] per set of a step_sets.sql write at ?2, of the sets it did not
-- write.
SELECT e.key FROM json_each(?1) AS e
WHERE NOT EXISTS (
  SELECT 1 FROM spool_step_sets AS s
  WHERE s.job_id = e.value->>0 AND s.name = e.value->>2 AND s.fence = e.value->>1 AND s.created_at = ?2)
ORDER BY e.key
