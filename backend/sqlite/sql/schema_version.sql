-- The schema version: the highest migration applied.
SELECT coalesce(max(version), 0) FROM spool_migrations
