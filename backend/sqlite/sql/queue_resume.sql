-- Resume queue ?1.
UPDATE spool_queues SET paused_at = NULL WHERE name = ?1 AND paused_at IS NOT NULL
