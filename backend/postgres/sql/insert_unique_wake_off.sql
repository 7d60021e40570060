-- insert_unique.sql setting spool.wake to 'off' for its transaction, so that
-- the insert trigger sends no notification (schema 10): set_config runs
-- once, in a materialized CTE the rows are joined with, before the
-- statement's trigger fires.
WITH spool_wake AS MATERIALIZED (SELECT set_config('spool.wake', 'off', true))
{{insert_unique_rows}}
) t CROSS JOIN spool_wake
ORDER BY t.ord
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND {{s}}.spool_holds_key(unique_states, state)
  DO UPDATE SET unique_key = EXCLUDED.unique_key
RETURNING id, xmax <> 0, run_at, state = 'available'
