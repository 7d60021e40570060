-- debounceFind locks job ? if it is still pending; a claim that took it
-- first leaves nothing to find.
SELECT id FROM {{db}}.spool_jobs WHERE id = ? AND state IN ('available', 'scheduled', 'retryable') FOR UPDATE
