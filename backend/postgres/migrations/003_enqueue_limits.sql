-- enqueue applies the limits the Go API applies (docs/limits.md): args are
-- measured as compact JSON, not as jsonb's re-spaced text (which adds a
-- space after every ':' and ',', up to half as much again); args and
-- metadata nest at most 31 levels; run_at lies in 1970-01-01..9999-12-31.

-- spool_json_depth is the deepest nesting of arrays and objects in j: 0 for
-- a scalar, 1 for {} or [].
CREATE FUNCTION {{schema}}.spool_json_depth(j jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  WITH RECURSIVE nest(v, depth) AS (
    SELECT j, 1 WHERE jsonb_typeof(j) IN ('array', 'object')
    UNION ALL
    SELECT c.v, n.depth + 1
    FROM nest n,
    LATERAL (
      SELECT value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(n.v) = 'array' THEN n.v END)
      UNION ALL
      SELECT value FROM jsonb_each(CASE WHEN jsonb_typeof(n.v) = 'object' THEN n.v END)
    ) AS c(v)
    WHERE jsonb_typeof(c.v) IN ('array', 'object')
  )
  SELECT coalesce(max(depth), 0) FROM nest
$$;

-- spool_json_compact_length is the size in bytes of j written as JSON with
-- no whitespace outside strings. jsonb's text form puts exactly one space
-- after each ':' and ',' outside strings and none elsewhere, so removing
-- spaces outside string literals leaves the compact form.
CREATE FUNCTION {{schema}}.spool_json_compact_length(j jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT octet_length(regexp_replace(j::text, '("(?:[^"\\]|\\.)*")| ', '\1', 'g'))
$$;

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
BEGIN
  IF kind IS NULL OR char_length(kind) NOT BETWEEN 1 AND 255 OR kind ~ '[[:cntrl:]]' THEN
    RAISE EXCEPTION 'spool.enqueue: kind must be 1 to 255 printable characters' USING ERRCODE = '22023';
  END IF;
  IF args IS NULL THEN
    RAISE EXCEPTION 'spool.enqueue: args must not be null' USING ERRCODE = '22023';
  END IF;
  -- The re-spaced text is never smaller than the compact form, so only a
  -- large value pays for measuring the compact one.
  IF octet_length(args::text) > 1048576 THEN
    size := {{schema}}.spool_json_compact_length(args);
    IF size > 1048576 THEN
      RAISE EXCEPTION 'spool.enqueue: args are % bytes as compact JSON, over the limit of 1048576', size USING ERRCODE = '22023';
    END IF;
  END IF;
  IF {{schema}}.spool_json_depth(args) > 31 THEN
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
  IF tags IS NULL OR cardinality(tags) > 32 OR EXISTS (SELECT 1 FROM unnest(tags) t WHERE t IS NULL OR t !~ '^[a-zA-Z0-9_.:-]{1,64}$') THEN
    RAISE EXCEPTION 'spool.enqueue: tags must be at most 32 of 1 to 64 characters from a-z A-Z 0-9 _ . : -' USING ERRCODE = '22023';
  END IF;
  IF metadata IS NULL OR jsonb_typeof(metadata) <> 'object' THEN
    RAISE EXCEPTION 'spool.enqueue: metadata must be a JSON object' USING ERRCODE = '22023';
  END IF;
  IF {{schema}}.spool_json_depth(metadata) > 31 THEN
    RAISE EXCEPTION 'spool.enqueue: metadata nests arrays and objects % levels deep, over the limit of 31', {{schema}}.spool_json_depth(metadata) USING ERRCODE = '22023';
  END IF;
  INSERT INTO {{schema}}.spool_jobs AS j (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata)
  VALUES (queue, kind, args, priority, at,
          CASE WHEN at > now() THEN 'scheduled' ELSE 'available' END::{{schema}}.spool_job_state,
          max_attempts, tags, metadata)
  RETURNING j.id INTO new_id;
  RETURN new_id;
END
$$;
