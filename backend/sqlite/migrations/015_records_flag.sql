-- A job's durable records (steps, step sets, signals) go with it by the
-- delete trigger, which ran its three DELETEs for every deleted job: a
-- drain that deletes its completed jobs paid three b-tree searches a job
-- for records almost no job has. has_records is set, by the tables' own
-- insert triggers, on the job a record is written for (whichever client
-- writes it), and the delete trigger runs only for a job that has it.
-- The migration sets it on every job that has records already.
ALTER TABLE spool_jobs ADD COLUMN has_records INTEGER NOT NULL DEFAULT 0;

UPDATE spool_jobs SET has_records = 1
WHERE id IN (SELECT job_id FROM spool_steps UNION SELECT job_id FROM spool_step_sets UNION SELECT job_id FROM spool_signals);

DROP TRIGGER spool_jobs_durable_gone;
CREATE TRIGGER spool_jobs_durable_gone AFTER DELETE ON spool_jobs
WHEN old.has_records
BEGIN
  DELETE FROM spool_steps WHERE job_id = old.id;
  DELETE FROM spool_step_sets WHERE job_id = old.id;
  DELETE FROM spool_signals WHERE job_id = old.id;
END;

CREATE TRIGGER spool_steps_mark AFTER INSERT ON spool_steps
BEGIN
  UPDATE spool_jobs SET has_records = 1 WHERE id = new.job_id AND has_records = 0;
END;

CREATE TRIGGER spool_step_sets_mark AFTER INSERT ON spool_step_sets
BEGIN
  UPDATE spool_jobs SET has_records = 1 WHERE id = new.job_id AND has_records = 0;
END;

CREATE TRIGGER spool_signals_mark AFTER INSERT ON spool_signals
BEGIN
  UPDATE spool_jobs SET has_records = 1 WHERE id = new.job_id AND has_records = 0;
END;
