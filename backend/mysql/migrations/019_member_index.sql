-- One index for workflow tasks, batch members and unsettled jobs (schema
-- 19). InnoDB keeps an entry for every row in every secondary index, NULL
-- keys included, so the three indexes spool_jobs_workflow (workflow_id),
-- spool_jobs_batch (batch_id, id) and spool_jobs_unsettled
-- (has_dependents) cost each plain job three entries to insert and three
-- to delete, for features it does not use. spool_jobs_member
-- (has_dependents, workflow_id, batch_id, id) serves their readers with one
-- entry per job:
-- - the leader's sweep for unsettled jobs: the has_dependents = 1 range;
-- - a workflow's tasks: has_dependents IN (0, 1) AND workflow_id = ?,
--   two ranges (has_dependents is only ever 0 or 1);
-- - a batch's members in id order: each of the two ranges
--   has_dependents = h AND workflow_id IS NULL AND batch_id = ? is in id
--   order, and a page merges the two (a job is a workflow task or a batch
--   member, never both, so a member's workflow_id is NULL).
-- The procedure adds the new index and drops the three old ones that the
-- table still has, in one ALTER (in place: no column changes, so the
-- table is not rebuilt); a run after a failure part way finds what is
-- left to do. MySQL has no ADD KEY IF NOT EXISTS, hence the procedure.
DROP PROCEDURE IF EXISTS {{db}}.spool_migrate_19
-- statement
CREATE PROCEDURE {{db}}.spool_migrate_19()
MODIFIES SQL DATA
BEGIN
  DECLARE v_clauses TEXT;
  SELECT GROUP_CONCAT(CONCAT('DROP KEY `', INDEX_NAME, '`') SEPARATOR ', ') INTO v_clauses
  FROM (SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'spool_jobs'
      AND INDEX_NAME IN ('spool_jobs_workflow', 'spool_jobs_batch', 'spool_jobs_unsettled')) k;
  IF NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'spool_jobs' AND INDEX_NAME = 'spool_jobs_member') THEN
    SET v_clauses = CONCAT_WS(', ', 'ADD KEY spool_jobs_member (has_dependents, workflow_id, batch_id, id)', v_clauses);
  END IF;
  IF v_clauses IS NOT NULL THEN
    SET @spool_migrate_19 = CONCAT('ALTER TABLE `', REPLACE(DATABASE(), '`', '``'), '`.spool_jobs ', v_clauses);
    PREPARE s FROM @spool_migrate_19;
    EXECUTE s;
    DEALLOCATE PREPARE s;
  END IF;
END
-- statement
CALL {{db}}.spool_migrate_19()
-- statement
DROP PROCEDURE {{db}}.spool_migrate_19
