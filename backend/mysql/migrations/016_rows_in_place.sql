-- Claims and completions that rewrite a row in place (schema 16). InnoDB
-- updates a row where it lies only when no column changes its stored
-- length; a NULL DATETIME takes no bytes, so a claim that set leased_until,
-- leased_by and attempted_at and a completion that set finalized_at (and
-- cleared the lease) made the row longer or shorter, and InnoDB moved it
-- within its page. Now:
-- - leased_until and attempted_at hold 1000-01-01 00:00:00 when there is
--   none, finalized_at 9999-12-31 23:59:59.999999 (after every finish, so
--   retention's "finalized_at < cutoff" and its index range skip unfinished
--   rows as they skipped NULL). Readers map both back to none, and NULL
--   (a row written by hand) as well.
-- - leased_by holds the claim's id padded with spaces to 64 bytes, and 64
--   spaces when the job was never claimed, so that a claim (of an id up to
--   64 bytes) overwrites a value of the same length too. The collation pads
--   with spaces when it compares (leased_by = 'id' finds 'id   '), and
--   readers trim them.
-- - The lease (leased_until, leased_by) means something only while the job
--   is running: a finish, cancel, rescue or release leaves it as it was
--   instead of clearing it, and readers report none for any other state.
--   That drops spool_jobs_lease_when_running.
-- - The other CHECK constraints go too: each claim and completion UPDATE
--   paid for evaluating them (the JSON rules parse tags and metadata), and
--   every writer validates the same rules first: the Go API before it writes (mysql.ErrInvalidValue and the typed
--   input errors), spool_enqueue in its body. A hand-written INSERT is no
--   longer checked (docs/mysql.md).
-- The columns stay nullable: a nullable column that holds a value is
-- rewritten in place as a NOT NULL one is, and making them NOT NULL would
-- rebuild the table.
--
-- The CHECK constraints are dropped by a procedure that drops the ones the
-- table has (a server that parses CHECK and ignores it stored none; a run
-- after a failure part-way finds them gone), then the defaults are set and
-- the existing NULLs replaced, each statement safe to run again.
DROP PROCEDURE IF EXISTS {{db}}.spool_migrate_16
-- statement
CREATE PROCEDURE {{db}}.spool_migrate_16()
MODIFIES SQL DATA
BEGIN
  DECLARE v_drops TEXT;
  SELECT GROUP_CONCAT(CONCAT('DROP CONSTRAINT `', CONSTRAINT_NAME, '`') SEPARATOR ', ') INTO v_drops
  FROM information_schema.TABLE_CONSTRAINTS
  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'spool_jobs' AND CONSTRAINT_TYPE = 'CHECK'
    AND CONSTRAINT_NAME LIKE 'spool\_jobs\_%';
  IF v_drops IS NOT NULL THEN
    SET @spool_migrate_16 = CONCAT('ALTER TABLE `', REPLACE(DATABASE(), '`', '``'), '`.spool_jobs ', v_drops);
    PREPARE s FROM @spool_migrate_16;
    EXECUTE s;
    DEALLOCATE PREPARE s;
  END IF;
END
-- statement
CALL {{db}}.spool_migrate_16()
-- statement
DROP PROCEDURE {{db}}.spool_migrate_16
-- statement
ALTER TABLE {{db}}.spool_jobs
  ALTER COLUMN leased_until SET DEFAULT '1000-01-01 00:00:00.000000',
  ALTER COLUMN attempted_at SET DEFAULT '1000-01-01 00:00:00.000000',
  ALTER COLUMN finalized_at SET DEFAULT '9999-12-31 23:59:59.999999',
  ALTER COLUMN leased_by SET DEFAULT '                                                                '
-- statement
UPDATE {{db}}.spool_jobs SET
  leased_until = COALESCE(leased_until, '1000-01-01 00:00:00.000000'),
  attempted_at = COALESCE(attempted_at, '1000-01-01 00:00:00.000000'),
  finalized_at = COALESCE(finalized_at, '9999-12-31 23:59:59.999999'),
  leased_by = IF(OCTET_LENGTH(COALESCE(leased_by, '')) < 64,
    CONCAT(COALESCE(leased_by, ''), REPEAT(' ', 64 - OCTET_LENGTH(COALESCE(leased_by, '')))), leased_by)
WHERE leased_until IS NULL OR attempted_at IS NULL OR finalized_at IS NULL
  OR leased_by IS NULL OR OCTET_LENGTH(leased_by) < 64
