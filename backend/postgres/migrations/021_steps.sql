-- Durable steps, waits and signals (schema 22, docs/durable.md).
--
-- spool_steps: a step's result, written only while its job is running
-- under the writing attempt's fence (a shared lock on the job's row while
-- the record checks it). spool_signals: the first signal of each name sent
-- to a job, kept whether or not the job waits for it yet. Neither refers
-- to spool_jobs by a foreign key: a claimed job leaves spool_jobs for a
-- lease row (schema 12). They go with their job when retention or a bulk
-- delete deletes it finished (the trigger); see docs/durable.md for the
-- deletes they outlive.
--
-- wait_signal names the signal a parked job (scheduled, run_at at its
-- timeout) waits for: spool_signal makes it due at once. A wait and a
-- signal on one job take turns on spool_signal_lock, so a signal sent
-- while the job parks is never missed: whichever comes second sees the
-- other's commit.
CREATE TABLE {{schema}}.spool_steps (
  job_id     bigint NOT NULL,
  name       text NOT NULL,
  result     jsonb NOT NULL,
  fence      integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, name)
);

CREATE TABLE {{schema}}.spool_signals (
  job_id     bigint NOT NULL,
  name       text NOT NULL,
  payload    jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, name)
);

ALTER TABLE {{schema}}.spool_jobs ADD COLUMN wait_signal text;

CREATE FUNCTION {{schema}}.spool_durable_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM {{schema}}.spool_steps WHERE job_id = old.id;
  DELETE FROM {{schema}}.spool_signals WHERE job_id = old.id;
  RETURN NULL;
END
$$;

CREATE TRIGGER spool_jobs_durable_gone AFTER DELETE ON {{schema}}.spool_jobs
FOR EACH ROW WHEN (old.state IN ('completed', 'discarded', 'cancelled'))
EXECUTE FUNCTION {{schema}}.spool_durable_gone();

-- spool_signal_lock takes the transaction-scoped lock that a wait and a
-- signal on job take turns on.
CREATE FUNCTION {{schema}}.spool_signal_lock(job bigint) RETURNS void LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtextextended('spool signal {{schema}} ' || job::text, 0))
$$;

-- spool_signal sends the signal signal_name with payload to job, from
-- Spool's client or from any SQL session: the first signal of a name is
-- kept (first = false for a later one, whose payload is dropped), and a
-- job parked waiting for it is made due at once (woke) and announced at
-- the commit. An unknown job raises no_data_found (SQLSTATE P0002).
--   SELECT * FROM spool.spool_signal(42, 'approved', '{"by": "ann"}');
CREATE FUNCTION {{schema}}.spool_signal(job bigint, signal_name text, payload jsonb DEFAULT 'null')
RETURNS TABLE (first boolean, woke boolean, queue text) LANGUAGE plpgsql AS $$
DECLARE
  q   text;
  pri smallint;
  due timestamptz;
  n   integer;
BEGIN
  IF signal_name IS NULL OR signal_name = '' OR octet_length(signal_name) > 200 THEN
    RAISE EXCEPTION 'spool_signal: a signal name is 1 to 200 bytes' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {{schema}}.spool_signal_lock(job);
  SELECT j.queue INTO q FROM {{schema}}.spool_jobs j WHERE j.id = job;
  IF NOT FOUND THEN
    SELECT v.queue INTO q FROM {{schema}}.spool_leased_jobs v
    WHERE v.id = job AND v.lease = ANY (ARRAY(
      SELECT l.id FROM {{schema}}.spool_leases l WHERE l.span @> job AND l.ids @> ARRAY[job]));
    IF NOT FOUND THEN
      RAISE EXCEPTION 'spool_signal: no job %', job USING ERRCODE = 'no_data_found';
    END IF;
  END IF;
  INSERT INTO {{schema}}.spool_signals (job_id, name, payload)
  VALUES (job, signal_name, coalesce(payload, 'null'::jsonb))
  ON CONFLICT (job_id, name) DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n = 0 THEN
    RETURN QUERY SELECT false, false, q;
    RETURN;
  END IF;
  UPDATE {{schema}}.spool_jobs j SET state = 'available', run_at = now()
  WHERE j.id = job AND j.state = 'scheduled' AND j.wait_signal = signal_name
  RETURNING j.priority, j.run_at INTO pri, due;
  IF NOT FOUND THEN
    RETURN QUERY SELECT true, false, q;
    RETURN;
  END IF;
  PERFORM pg_notify({{channel}}, q || ' ' || pri || ' ' || floor(extract(epoch FROM due) * 1000000)::bigint);
  RETURN QUERY SELECT true, true, q;
END
$$;
