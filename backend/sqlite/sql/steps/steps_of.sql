-- Steps of the job ?1, in the order recorded: its sets' names and results
-- (schema 14) and its spool_steps rows, by the time of their write, then
-- the order of the writes within it, then the order within a set.
SELECT name, result, fence, created_at FROM (
  SELECT n.value AS name, s.results ->> n.key AS result, s.fence, s.created_at, 0 AS src, s.rowid AS seq, n.key AS k
  FROM spool_step_sets AS s, json_each(s.names) AS n
  WHERE s.job_id = ?1
  UNION ALL
  SELECT name, result, fence, created_at, 1, rowid, 0 FROM spool_steps WHERE job_id = ?1
)
ORDER BY created_at, src, seq, k
