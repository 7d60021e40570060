-- Makes the looker's row of a set of queues (schema 18) when the first
-- process of the set listens: no holder, and ids read up to the highest
-- that process saw at its start (?), before its subscription was ready.
INSERT IGNORE INTO {{db}}.spool_looker (set_key, holder, until, cursor_id, slow)
VALUES (?, '', '1000-01-01 00:00:00', ?, 0)
