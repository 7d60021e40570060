-- insert.sql setting spool.wake to 'after' for its transaction, so that
-- the insert trigger sends no notification (schema 10): set_config runs
-- once, in a materialized CTE the rows are joined with, before the
-- statement's trigger fires.
WITH spool_wake AS MATERIALIZED (SELECT set_config('spool.wake', 'after', true))
{{insert_rows}}
) t CROSS JOIN spool_wake
ORDER BY t.ord
RETURNING id, false, run_at, state = 'available' -- never a duplicate: the second column of insert_unique.sql; the last two tell a wake-up after commit what to announce
