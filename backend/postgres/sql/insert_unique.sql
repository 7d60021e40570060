-- Insert of a call that has unique jobs (insert.sql without them: ON CONFLICT
-- makes every row a speculative insertion; BENCHMARKS.md, "Unique inserts
-- apart"). Ids come back in input order because
-- nextval runs in ORDER BY ord order. A unique row whose key
-- is held conflicts on spool_jobs_unique and returns the holder instead:
-- the no-op update locks it (so it cannot leave its holding states before
-- this transaction ends) and marks it in xmax, which is 0 for a row this
-- statement inserted.
{{insert_unique_rows}}
) t
ORDER BY t.ord
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND {{s}}.spool_holds_key(unique_states, state)
  DO UPDATE SET unique_key = EXCLUDED.unique_key
RETURNING id, xmax <> 0, run_at, state = 'available'
