-- The flow claim's clock and whether its queue is paused.
SELECT now(), EXISTS (SELECT 1 FROM {{s}}.spool_queues WHERE name = $1 AND paused_at IS NOT NULL)
