-- List: jobs by id after ?4 (keyset paging), filtered by queue ?1, kind
-- ?2 and the JSON array of states ?3 when given, at most ?5.
SELECT {{cols}} FROM spool_jobs
WHERE (?1 = '' OR queue = ?1) AND (?2 = '' OR kind = ?2)
  AND (json_array_length(?3) = 0 OR state IN (SELECT value FROM json_each(?3)))
  AND id > ?4
ORDER BY id
LIMIT ?5
