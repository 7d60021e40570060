-- debounceLock locks the key's row, making it if needed, and returns
-- the key's current job (NULL for a new key).
INSERT INTO {{s}}.spool_debounce AS d (key) VALUES ($1)
ON CONFLICT (key) DO UPDATE SET key = d.key
RETURNING d.job_id
