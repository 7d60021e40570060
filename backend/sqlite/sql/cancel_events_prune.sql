-- Drops cancellation events older than ?1 (now minus a minute).
DELETE FROM spool_cancels WHERE at < ?1
