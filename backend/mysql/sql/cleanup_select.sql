-- Cleanup, first step: the ids of up to ? jobs past their retention,
-- oldest finish first, by a plain read (no locks; cleanup.sql deletes
-- them). A locking scan of spool_jobs_finalized would lock each entry it
-- reads before its row, the reverse of every finish (the row, then the
-- entries it moves), and it reads one entry past its range: the next
-- finish, or an unfinished row's (finalized_at holds a sentinel after
-- every time, schema 16). A finish holding that row's lock then waits for
-- the entry, and the scan for the row: a deadlock. Params: those of
-- {{cleanup_due}}, then the limit.
SELECT id FROM {{db}}.spool_jobs
WHERE {{cleanup_due}}
ORDER BY finalized_at
LIMIT ?
