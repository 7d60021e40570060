-- A job's durable records flagged on its row (schema 15): has_records is
-- 1 once a step record, a step set or a signal of the job has been
-- written, so that the delete trigger, which takes a job's records with
-- it whichever statement deletes the job, runs its three deletes only for
-- a job that has some. A job without records (most, and every job of a
-- plain drain) is deleted without them: they were about a third of a
-- deleting completion's cost. The flag is set by triggers on the record
-- tables, not by Spool's statements, so it holds for every writer of a
-- record (each writes one only for a job that exists: its insert selects
-- the job's row). It is never cleared; a flag left on a job whose records
-- are gone costs that job's delete the three empty deletes, as before.
ALTER TABLE spool_jobs ADD COLUMN has_records INTEGER NOT NULL DEFAULT 0;

UPDATE spool_jobs SET has_records = 1 WHERE id IN (
  SELECT job_id FROM spool_steps UNION SELECT job_id FROM spool_step_sets UNION SELECT job_id FROM spool_signals);

-- A job's first record writes its row; later ones only read it.
CREATE TRIGGER spool_steps_flag AFTER INSERT ON spool_steps
BEGIN
  UPDATE spool_jobs SET has_records = 1 WHERE id = new.job_id AND has_records = 0;
END;

-- Step sets are the records' hot path (a set per job and write): the
-- statement that writes them (step_sets.sql) reads the job's row anyway
-- and copies its flag into job_flagged, so that the trigger, whose
-- statement costs as much as the set's insert, runs only for a job's
-- first set. A writer that does not name the column leaves it NULL, and
-- the trigger runs.
ALTER TABLE spool_step_sets ADD COLUMN job_flagged INTEGER;
CREATE TRIGGER spool_step_sets_flag AFTER INSERT ON spool_step_sets WHEN new.job_flagged IS NOT 1
BEGIN
  UPDATE spool_jobs SET has_records = 1 WHERE id = new.job_id AND has_records = 0;
END;
CREATE TRIGGER spool_signals_flag AFTER INSERT ON spool_signals
BEGIN
  UPDATE spool_jobs SET has_records = 1 WHERE id = new.job_id AND has_records = 0;
END;

DROP TRIGGER spool_jobs_durable_gone;
CREATE TRIGGER spool_jobs_durable_gone AFTER DELETE ON spool_jobs WHEN old.has_records
BEGIN
  DELETE FROM spool_steps WHERE job_id = old.id;
  DELETE FROM spool_step_sets WHERE job_id = old.id;
  DELETE FROM spool_signals WHERE job_id = old.id;
END;
