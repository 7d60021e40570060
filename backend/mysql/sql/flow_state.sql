-- The flow claim's clock (used for every time it decides on and writes)
-- and whether queue ? is paused.
SELECT UTC_TIMESTAMP(6), EXISTS (SELECT 1 FROM {{db}}.spool_queues WHERE name = ? AND paused_at IS NOT NULL)
