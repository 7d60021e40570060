-- The rows of insert_tasks.sql and insert_tasks_keyless.sql: the
-- statement up to its conflict clause.
INSERT INTO {{s}}.spool_jobs (id, queue, kind, args, priority, run_at, state, max_attempts, tags, metadata,
  unique_key, unique_states, flow_key, wait_kind, deps_left, has_dependents, workflow_id, workflow_task, batch_id)
SELECT t.id, t.queue, t.kind, t.args, t.priority, t.at,
  (CASE WHEN t.waits THEN 'waiting' WHEN t.at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state,
  t.max_attempts, string_to_array(t.tags, ','), coalesce(t.metadata, '{}'::jsonb),
  nullif(t.unique_key, ''), nullif(t.unique_states, 0), nullif(t.flow_key, ''),
  CASE WHEN t.waits THEN 'deps' END, t.deps, t.has_deps, nullif($17::bigint, 0), nullif(t.task, ''), nullif($18::bigint, 0)
FROM (
  SELECT u.*, coalesce(u.run_at, now() + u.delay_us * interval '1 microsecond') AS at
  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::jsonb[], $5::smallint[], $6::timestamptz[], $7::bigint[],
              $8::smallint[], $9::text[], $10::jsonb[], $11::text[], $12::smallint[], $13::text[],
              $14::boolean[], $15::integer[], $16::boolean[], $19::text[])
    AS u(id, queue, kind, args, priority, run_at, delay_us, max_attempts, tags, metadata, unique_key, unique_states,
         flow_key, waits, deps, has_deps, task)
) t
