-- Step records in sets (docs/durable.md, "The model"): the records one
-- write puts down for one job (a record batch, or the records an outcome
-- carries) are one row of spool_step_sets, their names and results side
-- by side in the order recorded, instead of a row of spool_steps each: a
-- job of five steps wrote five rows and ten b-tree entries (the table and
-- its primary key) where it now writes one row and two entries. names is
-- a JSON array of the names; results a JSON array of the results' texts
-- as JSON strings, so each is kept byte for byte. A set is keyed by its
-- first name; every name of a set is checked against all of the job's
-- records (its sets and its spool_steps rows) in the write transaction,
-- the one writer's, so a name is still recorded once per job.
-- spool_steps keeps the records of older clients, and those a set cannot
-- carry (a result not valid UTF-8) or written one at a time (StepRecord).
CREATE TABLE spool_step_sets (
  job_id     INTEGER NOT NULL,
  name       TEXT NOT NULL,
  names      TEXT NOT NULL,
  results    TEXT NOT NULL,
  fence      INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (job_id, name)
) STRICT;

-- A job's sets go with it as its other records do.
DROP TRIGGER spool_jobs_durable_gone;
CREATE TRIGGER spool_jobs_durable_gone AFTER DELETE ON spool_jobs
BEGIN
  DELETE FROM spool_steps WHERE job_id = old.id;
  DELETE FROM spool_step_sets WHERE job_id = old.id;
  DELETE FROM spool_signals WHERE job_id = old.id;
END;
