-- Part of flow_take_keys.sql: the oldest due pending job of ordered key
-- {{key}}, whose jobs step aside ({{max}} is 1; ?1 now, ?4 queue).
SELECT id FROM (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_flow_order
  WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND flow_key IS NOT NULL AND queue = ?4 AND flow_key = {{key}} AND run_at <= ?1
  ORDER BY id
  LIMIT {{max}}
)
