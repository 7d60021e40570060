-- Record an applied migration (version, name, applied_at in microseconds).
INSERT INTO spool_migrations (version, name, applied_at) VALUES (?, ?, ?)
