-- Wake-up notes above the last seq Listen saw, at most ? of them.
SELECT seq, body FROM {{db}}.spool_wake_notes WHERE seq > ? ORDER BY seq LIMIT ?
