-- Part of flow_take_keys.sql: ordered key {{key}}'s oldest pending job, if
-- due ({{max}} is 1; ?1 now, ?4 queue).
SELECT id FROM (
  SELECT id, run_at FROM spool_jobs INDEXED BY spool_jobs_flow_order
  WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND flow_key IS NOT NULL AND queue = ?4 AND flow_key = {{key}}
  ORDER BY id
  LIMIT {{max}}
)
WHERE run_at <= ?1
