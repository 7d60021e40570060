-- Whether queue ?1 is paused.
SELECT EXISTS (SELECT 1 FROM spool_queues WHERE name = ?1 AND paused_at IS NOT NULL)
