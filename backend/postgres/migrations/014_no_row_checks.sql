-- Row rules checked once per statement by the insert trigger, not by CHECK
-- constraints (schema 14). PostgreSQL compiles a table's CHECK expressions
-- again for every INSERT and UPDATE statement (each read back from its
-- stored node text and planned), so the eleven structural checks cost each
-- one-row statement about 50 µs of server time: a prepared one-row insert
-- took 152 µs with them and 98 µs without, and a steady queue at 1,000
-- jobs/s spent 7-15% less server CPU per job without them (BENCHMARKS.md).
--
-- Spool's own statements write only rows its Go API or enqueue() checked,
-- and keep the lease rule themselves. The rules still refuse a plain INSERT
-- that breaks them (never the contract, but a mistake should not go
-- through): the statement trigger, whose statements PL/pgSQL plans once per
-- session, checks the statement's rows, except for Spool's own inserts,
-- which set spool.wake. A plain UPDATE is no longer checked.
ALTER TABLE {{schema}}.spool_jobs
  DROP CONSTRAINT IF EXISTS spool_jobs_queue_length,
  DROP CONSTRAINT IF EXISTS spool_jobs_kind_length,
  DROP CONSTRAINT IF EXISTS spool_jobs_priority_range,
  DROP CONSTRAINT IF EXISTS spool_jobs_max_attempts_range,
  DROP CONSTRAINT IF EXISTS spool_jobs_attempt_range,
  DROP CONSTRAINT IF EXISTS spool_jobs_tags_count,
  DROP CONSTRAINT IF EXISTS spool_jobs_metadata_object,
  DROP CONSTRAINT IF EXISTS spool_jobs_lease_when_running,
  DROP CONSTRAINT IF EXISTS spool_jobs_unique_key_length,
  DROP CONSTRAINT IF EXISTS spool_jobs_unique_states,
  DROP CONSTRAINT IF EXISTS spool_jobs_flow_key_length;

CREATE OR REPLACE FUNCTION {{schema}}.spool_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad_id bigint;
  broken text;
BEGIN
  IF coalesce(current_setting('spool.wake', true), '') IN ('after', 'off') THEN
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
  PERFORM pg_notify({{channel}}, h.queue || ' ' || h.priority || ' ' ||
    floor(extract(epoch FROM h.run_at) * 1000000)::bigint)
  FROM (SELECT DISTINCT ON (queue) queue, priority, run_at
        FROM spool_new_jobs WHERE state = 'available'
        ORDER BY queue, priority, run_at) h;
  RETURN NULL;
END
$$;
