-- Part of flow_take_keys.sql: up to {{max}} of key {{key}}'s due pending
-- jobs in claim order (?1 now, ?4 queue).
SELECT id FROM (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_flow
  WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND flow_key IS NOT NULL AND queue = ?4 AND flow_key = {{key}} AND run_at <= ?1
  ORDER BY priority, run_at, id
  LIMIT {{max}}
)
