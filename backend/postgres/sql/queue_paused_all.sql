-- The paused queues, by name.
SELECT name, paused_at FROM {{s}}.spool_queues WHERE paused_at IS NOT NULL ORDER BY name
