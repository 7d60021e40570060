-- Workflow and batch membership in a table of its own (schema 20).
-- InnoDB keeps an entry for every row in every secondary index, NULL keys
-- included, so spool_jobs_member (has_dependents, workflow_id, batch_id,
-- id) cost every job an entry at its insert and at its delete (and their
-- purge), for features most jobs do not use. spool_job_keys holds a row
-- only for a workflow task, a batch member or a batch callback: written
-- with the job's own columns by the statements that set them (a workflow's
-- insert, a batch's, and settling, which clears has_dependents), never by
-- a claim, a finish or a plain job's insert, and deleted with its job by
-- the foreign key. spool_jobs keeps the columns (finishes read
-- has_dependents with the lease, retention workflow_id and batch_id); the
-- readers that looked a workflow's tasks, a batch's members or the
-- unsettled jobs up in spool_jobs_member look them up here.
--
-- Each statement is safe to run again after a failure part way: the table
-- is created if missing, the rows copied again over what a first run
-- copied, and the index dropped only if the table still has it (MySQL has
-- no DROP KEY IF EXISTS, hence the procedure). Run it with no process of
-- an older version writing workflows or batches: one that does writes no
-- row here.
CREATE TABLE IF NOT EXISTS {{db}}.spool_job_keys (
  job_id         BIGINT NOT NULL,
  has_dependents TINYINT NOT NULL DEFAULT 0,
  workflow_id    BIGINT NULL,
  batch_id       BIGINT NULL,
  PRIMARY KEY (job_id),
  -- A workflow's tasks in id order (InnoDB appends the primary key).
  KEY spool_job_keys_workflow (workflow_id),
  -- A batch's members and callbacks in id order.
  KEY spool_job_keys_batch (batch_id),
  -- The leader's sweep for jobs final but not yet settled.
  KEY spool_job_keys_unsettled (has_dependents),
  CONSTRAINT spool_job_keys_job FOREIGN KEY (job_id) REFERENCES {{db}}.spool_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB
-- statement
INSERT INTO {{db}}.spool_job_keys (job_id, has_dependents, workflow_id, batch_id)
SELECT id, has_dependents, workflow_id, batch_id FROM {{db}}.spool_jobs
WHERE workflow_id IS NOT NULL OR batch_id IS NOT NULL OR has_dependents <> 0
ON DUPLICATE KEY UPDATE has_dependents = VALUES(has_dependents), workflow_id = VALUES(workflow_id), batch_id = VALUES(batch_id)
-- statement
DROP PROCEDURE IF EXISTS {{db}}.spool_migrate_20
-- statement
CREATE PROCEDURE {{db}}.spool_migrate_20()
MODIFIES SQL DATA
BEGIN
  IF EXISTS (SELECT 1 FROM information_schema.STATISTICS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'spool_jobs' AND INDEX_NAME = 'spool_jobs_member') THEN
    SET @spool_migrate_20 = CONCAT('ALTER TABLE `', REPLACE(DATABASE(), '`', '``'), '`.spool_jobs DROP KEY spool_jobs_member');
    PREPARE s FROM @spool_migrate_20;
    EXECUTE s;
    DEALLOCATE PREPARE s;
  END IF;
END
-- statement
CALL {{db}}.spool_migrate_20()
-- statement
DROP PROCEDURE {{db}}.spool_migrate_20
