-- The rows of insert_unique.sql and its forms that defer the wake-up
-- (insert_unique_wake_*.sql): everything up to the subquery's alias.
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
