-- The states of workflow $1's tasks, locked in id order (the order every
-- write of several tasks locks them in).
SELECT id, state::text FROM {{s}}.spool_jobs WHERE workflow_id = $1 ORDER BY id FOR UPDATE
