-- The table of applied migrations, created before the first.
CREATE TABLE IF NOT EXISTS spool_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT
