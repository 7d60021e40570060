-- Unique jobs (schema 5). unique_key is a hex digest the client computes from
-- the job's kind and the parts its unique options choose; unique_states is
-- the set of states (one bit per state, in lifecycle order) in which the job
-- holds it. The partial unique index holds only the rows that hold a key,
-- so it stays as small as the unique jobs in those states, and the database
-- itself refuses a second holder: concurrent inserts of one key cannot both
-- succeed, whatever process they come from.
ALTER TABLE {{schema}}.spool_jobs
  ADD COLUMN unique_key text,
  ADD COLUMN unique_states smallint,
  ADD CONSTRAINT spool_jobs_unique_key_length CHECK (octet_length(unique_key) BETWEEN 1 AND 64),
  -- available, scheduled, retryable and running (bits 0 to 3) always hold
  -- the key: a job moves among them without an insert that could check it.
  ADD CONSTRAINT spool_jobs_unique_states CHECK (unique_states & 15 = 15 AND unique_states < 128);

-- Whether a job with state set states holds its key in state. Immutable,
-- so that it may appear in an index predicate.
CREATE FUNCTION {{schema}}.spool_holds_key(states smallint, state {{schema}}.spool_job_state)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (states::integer >> (CASE state
    WHEN 'available' THEN 0 WHEN 'scheduled' THEN 1 WHEN 'retryable' THEN 2 WHEN 'running' THEN 3
    WHEN 'completed' THEN 4 WHEN 'discarded' THEN 5 ELSE 6 END)) & 1 = 1
$$;

CREATE UNIQUE INDEX spool_jobs_unique ON {{schema}}.spool_jobs (unique_key)
  WHERE unique_key IS NOT NULL AND {{schema}}.spool_holds_key(unique_states, state);
