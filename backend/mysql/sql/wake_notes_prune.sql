-- Drops the wake-up notes below seq ?: minutes old, read by every
-- listener long since.
DELETE FROM {{db}}.spool_wake_notes WHERE seq < ?
