-- Spool schema for MySQL/MariaDB, version 3: spool_enqueue takes run_at as
-- text and converts it itself. As DATETIME(6), a run time past year 9999
-- was converted by the caller's session: refused with error 1292 in a
-- strict session, but in a lax one truncated with a warning to a value the
-- routine read as NULL, so the job ran at once. Now any run_at that is not
-- a time in 1970-01-01..9999-12-31 is refused with SQLSTATE 22023.
-- Statements are separated by lines holding only "-- statement".
DROP PROCEDURE IF EXISTS {{db}}.spool_enqueue
-- statement
-- spool_enqueue is the SQL contract for other languages: CALL it inside your
-- own transaction; the new job's id is LAST_INSERT_ID() afterwards. NULL
-- takes an argument's default (kind has none). It validates like the Go API
-- and signals SQLSTATE 22023 with a message naming the bad argument, writing
-- nothing. Parameters are LONGTEXT and DOUBLE so that no value is truncated
-- or converted by the caller's session on the way in; the routine runs in
-- the strict SQL mode it was created with, whatever the caller's session
-- uses.
CREATE PROCEDURE {{db}}.spool_enqueue(
  IN p_kind         LONGTEXT CHARACTER SET utf8mb4,
  IN p_args         LONGTEXT CHARACTER SET utf8mb4,
  IN p_queue        LONGTEXT CHARACTER SET utf8mb4,
  IN p_priority     DOUBLE,
  IN p_run_at       LONGTEXT CHARACTER SET utf8mb4,
  IN p_max_attempts DOUBLE,
  IN p_tags         LONGTEXT CHARACTER SET utf8mb4,
  IN p_metadata     LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_args LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_args, '{}');
  DECLARE v_queue LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_queue, 'default');
  DECLARE v_priority DOUBLE DEFAULT COALESCE(p_priority, 0);
  DECLARE v_run_at DATETIME(6);
  DECLARE v_max_attempts DOUBLE DEFAULT COALESCE(p_max_attempts, 25);
  DECLARE v_tags LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_tags, '[]');
  DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_metadata, '{}');
  DECLARE v_tag LONGTEXT CHARACTER SET utf8mb4;
  DECLARE i INT DEFAULT 0;

  -- One clock reading: NULL means now, so the job is available, not
  -- scheduled a microsecond ahead.
  -- A DATETIME argument arrives as its text, which converts back exactly.
  -- Text that is no valid DATETIME(6) (a year past 9999, February 30th)
  -- fails the conversion with error 1292 in the routine's strict mode; the
  -- handler leaves v_run_at NULL so that the range check below names it.
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1292 SET v_run_at = NULL;
    SET v_run_at = IF(p_run_at IS NULL, v_now, CAST(p_run_at AS DATETIME(6)));
  END;

  IF p_kind IS NULL OR CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 255
     OR p_kind COLLATE utf8mb4_bin REGEXP '[\\x00-\\x1F\\x7F]' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: kind must be 1 to 255 printable characters';
  END IF;
  IF NOT JSON_VALID(v_args) THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: args must be valid JSON nested at most 31 levels deep (MariaDB refuses 32)';
  END IF;
  IF OCTET_LENGTH(v_args) > 1048576 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: args are over the limit of 1048576 bytes';
  END IF;
  IF NOT (v_queue COLLATE utf8mb4_bin REGEXP '^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}\\z') THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: queue must be 1 to 128 of a-z A-Z 0-9 _ . -, not starting with . or -';
  END IF;
  IF v_priority NOT BETWEEN 0 AND 100 OR v_priority <> FLOOR(v_priority) THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: priority must be a whole number in 0..100';
  END IF;
  IF v_max_attempts NOT BETWEEN 1 AND 1000 OR v_max_attempts <> FLOOR(v_max_attempts) THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: max_attempts must be a whole number in 1..1000';
  END IF;
  IF v_run_at IS NULL OR v_run_at < '1970-01-01' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: run_at is out of range 1970-01-01..9999-12-31 (or not a time)';
  END IF;
  IF NOT JSON_VALID(v_tags) OR JSON_TYPE(v_tags) <> 'ARRAY' OR JSON_LENGTH(v_tags) > 32 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: tags must be a JSON array of at most 32 strings';
  END IF;
  WHILE i < JSON_LENGTH(v_tags) DO
    SET v_tag = JSON_EXTRACT(v_tags, CONCAT('$[', i, ']'));
    IF JSON_TYPE(v_tag) <> 'STRING'
       OR NOT (JSON_UNQUOTE(v_tag) COLLATE utf8mb4_bin REGEXP '^[a-zA-Z0-9_.:-]{1,64}\\z') THEN
      SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: each tag must be 1 to 64 of a-z A-Z 0-9 _ . : -';
    END IF;
    SET i = i + 1;
  END WHILE;
  IF NOT JSON_VALID(v_metadata) OR JSON_TYPE(v_metadata) <> 'OBJECT' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: metadata must be a JSON object nested at most 31 levels deep';
  END IF;

  INSERT INTO {{db}}.spool_jobs (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata, created_at)
  VALUES (v_queue, p_kind, v_args, CAST(v_priority AS SIGNED), v_run_at,
          IF(v_run_at > v_now, 'scheduled', 'available'), CAST(v_max_attempts AS SIGNED), v_tags, v_metadata, v_now);
END
