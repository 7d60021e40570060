-- Jobs above the last id Listen saw (a primary-key range, empty most of
-- the time), at most ? of them.
SELECT id, queue FROM {{db}}.spool_jobs WHERE id > ? ORDER BY id LIMIT ?
