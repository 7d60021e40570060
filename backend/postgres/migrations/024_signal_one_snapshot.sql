-- spool_signal looks for its job in spool_jobs and in the lease rows in
-- one statement, so under one snapshot. Schema 21 looked in two
-- statements, each with its own snapshot: a job that a claim or an
-- unlease moved from one to the other between them was in neither, and
-- the signal failed with no_data_found for a job that existed.
CREATE OR REPLACE FUNCTION {{schema}}.spool_signal(job bigint, signal_name text, payload jsonb DEFAULT 'null')
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
  SELECT x.queue INTO q FROM (
    SELECT j.queue FROM {{schema}}.spool_jobs j WHERE j.id = job
    UNION ALL
    SELECT v.queue FROM {{schema}}.spool_leased_jobs v
    WHERE v.id = job AND v.lease = ANY (ARRAY(
      SELECT l.id FROM {{schema}}.spool_leases l WHERE l.span @> job AND l.ids @> ARRAY[job]))
  ) x LIMIT 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'spool_signal: no job %', job USING ERRCODE = 'no_data_found';
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
