-- Whether the file has been migrated at all.
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'spool_migrations'
