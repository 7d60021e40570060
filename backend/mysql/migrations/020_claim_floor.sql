-- The claim floor (schema 20), kept in the queue's claim lock row (stripe
-- -1 of spool_flow_stripes). A claim updates a row's claim index entry
-- from phase 1 to phase 2: InnoDB delete-marks the old entry and leaves it
-- at the head of the queue's pending range until its purge removes it, and
-- every claim that scans from the head steps over those entries (and
-- checks each for a lock). floor_priority, floor_run_at and floor_id are
-- the claim-order key of the last row the queue's last claim under the
-- lock took; the next claim under the lock reads the floor's priority
-- above it. head_at is when a claim under the lock last read from the
-- queue's head, which one does at least once a second (the server's
-- clock), so a job left below the floor (an insert that committed after a
-- claim passed its key, a released or rescued job, a rolled-back small
-- claim's rows) waits for it at most that long. All NULL: no floor, the
-- next claim reads from the head. Flow stripes (0 and up) leave them NULL.
-- MySQL has no ADD COLUMN IF NOT EXISTS, hence the procedure.
DROP PROCEDURE IF EXISTS {{db}}.spool_migrate_20
-- statement
CREATE PROCEDURE {{db}}.spool_migrate_20()
MODIFIES SQL DATA
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.COLUMNS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'spool_flow_stripes' AND COLUMN_NAME = 'head_at') THEN
    SET @spool_migrate_20 = CONCAT('ALTER TABLE `', REPLACE(DATABASE(), '`', '``'), '`.spool_flow_stripes ',
      'ADD COLUMN floor_priority SMALLINT NULL, ADD COLUMN floor_run_at DATETIME(6) NULL, ',
      'ADD COLUMN floor_id BIGINT NULL, ADD COLUMN head_at DATETIME(6) NULL');
    PREPARE s FROM @spool_migrate_20;
    EXECUTE s;
    DEALLOCATE PREPARE s;
  END IF;
END
-- statement
CALL {{db}}.spool_migrate_20()
-- statement
DROP PROCEDURE {{db}}.spool_migrate_20
