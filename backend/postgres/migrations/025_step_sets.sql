-- Step records in sets (docs/durable.md, "The model"): the records a
-- batch writes for one job are one row of spool_step_sets, their names
-- and results side by side in the order recorded, instead of a row of
-- spool_steps each: a job of five steps wrote five rows and five entries
-- of their index where it now writes one or two. A set is keyed by its
-- first name, which no other record of the job has; the other names of
-- a job are checked against its sets (and against its spool_steps rows,
-- which clients before this schema write) while the job's row is locked.
-- A batch starts a new set of a job past each 64 KiB of results, so a
-- set holds at most 64 KiB and one more result.
CREATE TABLE {{schema}}.spool_step_sets (
  job_id     bigint NOT NULL,
  name       text NOT NULL,
  names      text[] NOT NULL,
  results    jsonb NOT NULL, -- a JSON array, one element per name
  fence      integer NOT NULL,
  part       integer NOT NULL DEFAULT 0, -- its order among its batch's sets of the job
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, name)
);

-- A job's sets go with it as its other records do.
CREATE OR REPLACE FUNCTION {{schema}}.spool_durable_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM {{schema}}.spool_steps WHERE job_id = old.id;
  DELETE FROM {{schema}}.spool_step_sets WHERE job_id = old.id;
  DELETE FROM {{schema}}.spool_signals WHERE job_id = old.id;
  RETURN NULL;
END
$$;
