-- Durable steps, waits and signals (schema 11, docs/durable.md). A step's
-- result is written only while its job is running under the writing
-- attempt's fence; a signal is kept from its first send, the first of a
-- name winning. wait_signal names the signal a parked job waits for. Times
-- in microseconds by the store's clock. A job's steps and signals go with
-- it (the trigger), whichever statement deletes it.
CREATE TABLE spool_steps (
  job_id     INTEGER NOT NULL,
  name       TEXT NOT NULL,
  result     TEXT NOT NULL,
  fence      INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (job_id, name)
) STRICT;

CREATE TABLE spool_signals (
  job_id     INTEGER NOT NULL,
  name       TEXT NOT NULL,
  payload    TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (job_id, name)
) STRICT;

ALTER TABLE spool_jobs ADD COLUMN wait_signal TEXT;

CREATE TRIGGER spool_jobs_durable_gone AFTER DELETE ON spool_jobs
BEGIN
  DELETE FROM spool_steps WHERE job_id = old.id;
  DELETE FROM spool_signals WHERE job_id = old.id;
END;
