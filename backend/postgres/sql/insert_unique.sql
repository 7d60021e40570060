-- Insert of a call that has unique jobs (insert.sql without them: ON CONFLICT
-- makes every row a speculative insertion, which cost 18% of InsertMany's
-- rate at 1,000 rows per call). Ids come back in input order because
-- nextval runs in ORDER BY ord order. A unique row whose key
-- is held conflicts on spool_jobs_unique and returns the holder instead:
-- the no-op update locks it (so it cannot leave its holding states before
-- this transaction ends) and marks it in xmax, which is 0 for a row this
-- statement inserted.
INSERT INTO {{s}}.spool_jobs (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata,
  unique_key, unique_states, flow_key)
SELECT t.queue, t.kind, t.args, t.priority, t.at,
  (CASE WHEN t.at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state,
  t.max_attempts, string_to_array(t.tags, ','), coalesce(t.metadata, '{}'::jsonb),
  nullif(t.unique_key, ''), nullif(t.unique_states, 0), nullif(t.flow_key, '')
FROM (
  SELECT u.*, coalesce(u.run_at, now() + u.delay_us * interval '1 microsecond') AS at
  FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::smallint[], $5::timestamptz[], $6::bigint[],
              $7::smallint[], $8::text[], $9::jsonb[], $10::text[], $11::smallint[], $12::text[])
    WITH ORDINALITY AS u(queue, kind, args, priority, run_at, delay_us, max_attempts, tags, metadata,
                         unique_key, unique_states, flow_key, ord)
) t
ORDER BY t.ord
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND {{s}}.spool_holds_key(unique_states, state)
  DO UPDATE SET unique_key = EXCLUDED.unique_key
RETURNING id, xmax <> 0, run_at, state = 'available'
