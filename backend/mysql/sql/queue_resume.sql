-- Resume a queue.
UPDATE {{db}}.spool_queues SET paused_at = NULL WHERE name = ? AND paused_at IS NOT NULL
