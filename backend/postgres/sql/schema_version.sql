SELECT coalesce(max(version), 0) FROM {{s}}.spool_migrations
