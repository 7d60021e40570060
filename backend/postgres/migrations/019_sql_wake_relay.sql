-- Wake-ups for jobs inserted from SQL without a notification per
-- transaction (schema 19). A NOTIFY holds PostgreSQL's notification lock
-- (one for the whole server) from the transaction's pre-commit to the end
-- of its commit, WAL flush included, so every notifying commit waits for
-- the one before it: pgbench with 8 clients calling enqueue() ran at 0.19
-- of a plain INSERT into a copy of spool_jobs (BENCHMARKS.md).
--
-- An insert from SQL now notifies only while no client relays such inserts.
-- Every one (enqueue() for its row, the insert trigger for other
-- statements)
--   - takes a shared transaction-scoped advisory lock (key 1397836887 and
--     the oid of spool_sql_enqueues), held until its transaction has ended;
--   - counts itself in spool_sql_enqueues (a sequence: not transactional,
--     never waits for another transaction);
--   - notifies at commit, as before, unless spool_sql_relay holds a time
--     that has not passed (last_value / 1024, in microseconds since the
--     epoch by the server's clock; last_value % 1024 names the relay).
-- The relaying client polls the counter and the lock about every
-- millisecond and notifies every client ('* sql') when the counter moved
-- and, again, once the lock is free (every counted insert has then ended,
-- committed or not, so a claim from then on sees its rows). It holds the
-- time 50 ms ahead and renews it while inserts come; a relay that dies
-- stops renewing it, and inserts notify again.
-- The trigger's and enqueue()'s notifications end with the field "sql",
-- which starts the clients' relays.
CREATE SEQUENCE {{schema}}.spool_sql_enqueues;
CREATE SEQUENCE {{schema}}.spool_sql_relay MINVALUE 0 START 0;
-- A producer's role needs these to insert (beside INSERT on spool_jobs and
-- USAGE on its id sequence); setting the relay's time is left to the
-- clients' role.
GRANT USAGE ON SEQUENCE {{schema}}.spool_sql_enqueues TO PUBLIC;
GRANT SELECT ON SEQUENCE {{schema}}.spool_sql_relay TO PUBLIC;

CREATE OR REPLACE FUNCTION {{schema}}.spool_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad_id bigint;
  broken text;
  notices text[];
BEGIN
  IF coalesce(current_setting('spool.wake', true), '') IN ('after', 'off', 'enqueue') THEN
    RETURN NULL;
  END IF;
  -- A rule whose value is NULL passes, as a CHECK constraint's would.
  SELECT id, CASE
      WHEN NOT char_length(queue) BETWEEN 1 AND 128 THEN 'queue must be 1 to 128 characters'
      WHEN NOT char_length(kind) BETWEEN 1 AND 255 THEN 'kind must be 1 to 255 characters'
      WHEN NOT priority BETWEEN 0 AND 100 THEN 'priority must be 0 to 100'
      WHEN NOT max_attempts BETWEEN 1 AND 1000 THEN 'max_attempts must be 1 to 1000'
      WHEN NOT attempt >= 0 THEN 'attempt must not be negative'
      WHEN NOT cardinality(tags) <= 32 THEN 'tags must be at most 32'
      WHEN NOT jsonb_typeof(metadata) = 'object' THEN 'metadata must be a JSON object'
      WHEN NOT (state = 'running') = (leased_until IS NOT NULL) THEN 'leased_until must be set exactly when state is running'
      WHEN NOT octet_length(unique_key) BETWEEN 1 AND 64 THEN 'unique_key must be 1 to 64 bytes'
      WHEN NOT (unique_states::integer & 15 = 15 AND unique_states < 128) THEN 'unique_states must hold bits 0 to 3 and be below 128'
      ELSE 'flow_key must be 1 to 255 bytes'
    END
  INTO bad_id, broken
  FROM spool_new_jobs
  WHERE NOT (char_length(queue) BETWEEN 1 AND 128 AND char_length(kind) BETWEEN 1 AND 255
    AND priority BETWEEN 0 AND 100 AND max_attempts BETWEEN 1 AND 1000 AND attempt >= 0
    AND cardinality(tags) <= 32 AND jsonb_typeof(metadata) = 'object'
    AND (state = 'running') = (leased_until IS NOT NULL)
    AND coalesce(octet_length(unique_key) BETWEEN 1 AND 64, true)
    AND coalesce(unique_states::integer & 15 = 15 AND unique_states < 128, true)
    AND coalesce(octet_length(flow_key) BETWEEN 1 AND 255, true))
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'spool_jobs: job %: %', bad_id, broken USING ERRCODE = '23514';
  END IF;
  SELECT array_agg(h.queue || ' ' || h.priority || ' ' ||
    floor(extract(epoch FROM h.run_at) * 1000000)::bigint || ' sql')
  INTO notices
  FROM (SELECT DISTINCT ON (queue) queue, priority, run_at
        FROM spool_new_jobs WHERE state = 'available'
        ORDER BY queue, priority, run_at) h;
  IF notices IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM pg_advisory_xact_lock_shared(1397836887, '{{schema}}.spool_sql_enqueues'::regclass::oid::integer);
  PERFORM nextval('{{schema}}.spool_sql_enqueues');
  IF (SELECT last_value / 1024 FROM {{schema}}.spool_sql_relay) <= floor(extract(epoch FROM clock_timestamp()) * 1000000) THEN
    PERFORM pg_notify({{channel}}, n) FROM unnest(notices) n;
  END IF;
  RETURN NULL;
END
$$;

-- enqueue checks its arguments as before, with the costly checks only where
-- they can fail: args and metadata nest at most as deep as their text has
-- '[' and '{' characters (strings included), so the recursive depth
-- function, which PostgreSQL plans again at every call (about 35 µs), runs
-- only when there are more than 31 of them; an empty tag array has no tag
-- to match.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue(
  kind         text,
  args         jsonb DEFAULT '{}',
  queue        text DEFAULT 'default',
  priority     integer DEFAULT 0,
  run_at       timestamptz DEFAULT NULL,
  max_attempts integer DEFAULT 25,
  tags         text[] DEFAULT '{}',
  metadata     jsonb DEFAULT '{}'
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  new_id bigint;
  at     timestamptz := coalesce(run_at, now());
  size   integer;
  doc    text;
  wake   text;
BEGIN
  IF kind IS NULL OR char_length(kind) NOT BETWEEN 1 AND 255 OR kind ~ '[[:cntrl:]]' THEN
    RAISE EXCEPTION 'spool.enqueue: kind must be 1 to 255 printable characters' USING ERRCODE = '22023';
  END IF;
  IF args IS NULL THEN
    RAISE EXCEPTION 'spool.enqueue: args must not be null' USING ERRCODE = '22023';
  END IF;
  doc := args::text;
  -- The re-spaced text is never smaller than the compact form, so only a
  -- large value pays for measuring the compact one.
  IF octet_length(doc) > 1048576 THEN
    size := {{schema}}.spool_json_compact_length(args);
    IF size > 1048576 THEN
      RAISE EXCEPTION 'spool.enqueue: args are % bytes as compact JSON, over the limit of 1048576', size USING ERRCODE = '22023';
    END IF;
  END IF;
  IF length(doc) - length(translate(doc, '[{', '')) > 31 AND {{schema}}.spool_json_depth(args) > 31 THEN
    RAISE EXCEPTION 'spool.enqueue: args nest arrays and objects % levels deep, over the limit of 31', {{schema}}.spool_json_depth(args) USING ERRCODE = '22023';
  END IF;
  IF queue IS NULL OR queue !~ '^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$' THEN
    RAISE EXCEPTION 'spool.enqueue: queue % is invalid (1 to 128 of a-z A-Z 0-9 _ . -, not starting with . or -)', quote_nullable(queue) USING ERRCODE = '22023';
  END IF;
  IF priority IS NULL OR priority NOT BETWEEN 0 AND 100 THEN
    RAISE EXCEPTION 'spool.enqueue: priority % is out of range 0..100', priority USING ERRCODE = '22023';
  END IF;
  IF at < '1970-01-01 00:00:00+00' OR at >= '10000-01-01 00:00:00+00' THEN
    RAISE EXCEPTION 'spool.enqueue: run_at % is out of range 1970-01-01..9999-12-31 (UTC)', at USING ERRCODE = '22023';
  END IF;
  IF max_attempts IS NULL OR max_attempts NOT BETWEEN 1 AND 1000 THEN
    RAISE EXCEPTION 'spool.enqueue: max_attempts % is out of range 1..1000', max_attempts USING ERRCODE = '22023';
  END IF;
  IF tags IS NULL OR (cardinality(tags) > 0 AND (cardinality(tags) > 32
      OR EXISTS (SELECT 1 FROM unnest(tags) t WHERE t IS NULL OR t !~ '^[a-zA-Z0-9_.:-]{1,64}$'))) THEN
    RAISE EXCEPTION 'spool.enqueue: tags must be at most 32 of 1 to 64 characters from a-z A-Z 0-9 _ . : -' USING ERRCODE = '22023';
  END IF;
  IF metadata IS NULL OR jsonb_typeof(metadata) <> 'object' THEN
    RAISE EXCEPTION 'spool.enqueue: metadata must be a JSON object' USING ERRCODE = '22023';
  END IF;
  IF metadata <> '{}' THEN
    doc := metadata::text;
    IF length(doc) - length(translate(doc, '[{', '')) > 31 AND {{schema}}.spool_json_depth(metadata) > 31 THEN
      RAISE EXCEPTION 'spool.enqueue: metadata nests arrays and objects % levels deep, over the limit of 31', {{schema}}.spool_json_depth(metadata) USING ERRCODE = '22023';
    END IF;
  END IF;
  -- The row is checked: the insert trigger neither checks it again nor
  -- announces it (spool.wake 'enqueue'); this function does.
  wake := current_setting('spool.wake', true);
  PERFORM set_config('spool.wake', 'enqueue', true);
  INSERT INTO {{schema}}.spool_jobs AS j (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata)
  VALUES (queue, kind, args, priority, at,
          CASE WHEN at > now() THEN 'scheduled' ELSE 'available' END::{{schema}}.spool_job_state,
          max_attempts, tags, metadata)
  RETURNING j.id INTO new_id;
  PERFORM set_config('spool.wake', coalesce(wake, ''), true);
  IF at <= now() AND coalesce(wake, '') NOT IN ('after', 'off') THEN
    PERFORM pg_advisory_xact_lock_shared(1397836887, '{{schema}}.spool_sql_enqueues'::regclass::oid::integer);
    PERFORM nextval('{{schema}}.spool_sql_enqueues');
    IF (SELECT last_value / 1024 FROM {{schema}}.spool_sql_relay) <= floor(extract(epoch FROM clock_timestamp()) * 1000000) THEN
      PERFORM pg_notify({{channel}}, queue || ' ' || priority || ' ' || floor(extract(epoch FROM at) * 1000000)::bigint || ' sql');
    END IF;
  END IF;
  RETURN new_id;
END
$$;
