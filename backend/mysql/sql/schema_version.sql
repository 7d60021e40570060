SELECT COALESCE(MAX(version), 0) FROM {{db}}.spool_migrations
