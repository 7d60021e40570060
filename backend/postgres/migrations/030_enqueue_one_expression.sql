-- enqueue() with fewer expressions (schema 30). PL/pgSQL prepares each
-- expression of a function again in every transaction that evaluates it
-- (ExecInitExpr), so a caller that enqueues one job per transaction pays
-- for every step of every expression the call runs, and schema 29's call
-- ran about twenty: each rule its own IF, the wake-up's lock, counter and
-- time test each their own. Now a call whose arguments pass without a
-- closer look (no tags or metadata, small args) runs one expression for
-- all the rules, and the wake-up is one expression whose CASE keeps the
-- order lock, counter, time. Any other call runs schema 29's rules one by
-- one, with their errors, so what is accepted and refused is unchanged.
-- The relay's time is compared in double precision (date_part) instead
-- of numeric (extract), exact to the microsecond until the year 2255.
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
  doc    text := args::text;
  wake   text := current_setting('spool.wake', true);
  done   text;
BEGIN
  -- One expression passes a call whose arguments every rule below accepts
  -- without looking further: no tags or metadata, args of at most 1 MiB
  -- as text with at most 31 '[' and '{'. Any other call, valid or not,
  -- takes the rules one by one, which raise each its own error.
  IF NOT coalesce(char_length(kind) BETWEEN 1 AND 255 AND kind !~ '[[:cntrl:]]'
      AND octet_length(doc) <= 1048576
      AND (octet_length(doc) <= 31 OR length(doc) - length(translate(doc, '[{', '')) <= 31)
      AND char_length(queue) <= 128 AND queue ~ '^[a-zA-Z0-9_][a-zA-Z0-9_.-]*$'
      AND priority BETWEEN 0 AND 100
      AND at >= '1970-01-01 00:00:00+00' AND at < '10000-01-01 00:00:00+00'
      AND max_attempts BETWEEN 1 AND 1000
      AND cardinality(tags) = 0 AND metadata = '{}', false) THEN
    IF kind IS NULL OR char_length(kind) NOT BETWEEN 1 AND 255 OR kind ~ '[[:cntrl:]]' THEN
      RAISE EXCEPTION 'spool.enqueue: kind must be 1 to 255 printable characters' USING ERRCODE = '22023';
    END IF;
    IF args IS NULL THEN
      RAISE EXCEPTION 'spool.enqueue: args must not be null' USING ERRCODE = '22023';
    END IF;
    -- The re-spaced text is never smaller than the compact form, so only a
    -- large value pays for measuring the compact one.
    IF octet_length(doc) > 1048576 THEN
      size := {{schema}}.spool_json_compact_length(args);
      IF size > 1048576 THEN
        RAISE EXCEPTION 'spool.enqueue: args are % bytes as compact JSON, over the limit of 1048576', size USING ERRCODE = '22023';
      END IF;
    END IF;
    -- Args nest at most as deep as their text has '[' and '{' characters, so
    -- the recursive depth function runs only when there are more than 31.
    IF length(doc) - length(translate(doc, '[{', '')) > 31 AND {{schema}}.spool_json_depth(args) > 31 THEN
      RAISE EXCEPTION 'spool.enqueue: args nest arrays and objects % levels deep, over the limit of 31', {{schema}}.spool_json_depth(args) USING ERRCODE = '22023';
    END IF;
    -- The length apart: a bounded repetition ({0,127}) would make the
    -- regular expression 128 copies of its bracket, run at every call.
    IF queue IS NULL OR char_length(queue) > 128 OR queue !~ '^[a-zA-Z0-9_][a-zA-Z0-9_.-]*$' THEN
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
    IF tags IS NULL OR cardinality(tags) > 32 THEN
      RAISE EXCEPTION 'spool.enqueue: tags must be at most 32 of 1 to 64 characters from a-z A-Z 0-9 _ . : -' USING ERRCODE = '22023';
    END IF;
    -- The one check with a subquery runs only when there is a tag to match.
    IF cardinality(tags) > 0 THEN
      IF EXISTS (SELECT 1 FROM unnest(tags) t WHERE t IS NULL OR t !~ '^[a-zA-Z0-9_.:-]{1,64}$') THEN
        RAISE EXCEPTION 'spool.enqueue: tags must be at most 32 of 1 to 64 characters from a-z A-Z 0-9 _ . : -' USING ERRCODE = '22023';
      END IF;
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
  END IF;
  -- The row is checked: the insert trigger neither checks it again nor
  -- announces it (spool.wake 'enqueue'); this function does.
  done := set_config('spool.wake', 'enqueue', true);
  INSERT INTO {{schema}}.spool_jobs AS j (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata)
  VALUES (queue, kind, args, priority, at,
          CASE WHEN at > now() THEN 'scheduled' ELSE 'available' END::{{schema}}.spool_job_state,
          max_attempts, tags, metadata)
  RETURNING j.id INTO new_id;
  done := set_config('spool.wake', coalesce(wake, ''), true);
  -- The wake-up of a job runnable now, in one expression: a CASE tests
  -- its conditions in order, so the lock is taken before the counter
  -- moves, and the relay's time (NULL until the first relay sets one) is
  -- read last.
  IF (CASE WHEN at > now() OR coalesce(wake, '') IN ('after', 'off') THEN false
           WHEN pg_advisory_xact_lock_shared(1397836887, '{{schema}}.spool_sql_enqueues'::regclass::oid::integer) IS NULL THEN false
           WHEN nextval('{{schema}}.spool_sql_enqueues') IS NULL THEN false
           ELSE coalesce(pg_sequence_last_value('{{schema}}.spool_sql_relay'), 0) / 1024 <= date_part('epoch', clock_timestamp()) * 1000000
      END) THEN
    PERFORM pg_notify({{channel}}, queue || ' ' || priority || ' ' || floor(extract(epoch FROM at) * 1000000)::bigint || ' sql');
  END IF;
  RETURN new_id;
END
$$;
