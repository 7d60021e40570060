-- Spool schema for MySQL/MariaDB, version 3: spool_enqueue stores nothing
-- the Go API would refuse and nothing other than what it was given.
-- - run_at is text, converted by the routine. As DATETIME(6) it was
--   converted by the caller's session, which in a lax SQL mode turned a
--   run time past year 9999 into a value read as NULL: the job ran at once.
-- - Text arguments are bytes, decoded by the routine: a lax session replaced
--   invalid UTF-8 with '?' on the way in.
-- - args and metadata are RFC 8259 JSON without U+0000 (spool_json_strict);
--   MariaDB's JSON_VALID also takes \0 escapes and numbers such as 1. or 1e.
-- Statements are separated by lines holding only "-- statement".
DROP FUNCTION IF EXISTS {{db}}.spool_json_strict
-- statement
-- spool_json_strict is JSON_VALID plus the rules of RFC 8259 that MariaDB's
-- parser lets through: escapes other than \" \\ \/ \b \f \n \r \t \uXXXX
-- (MariaDB takes \0 or \x) and numbers outside the JSON grammar (MariaDB
-- takes 1. and 1.e5 and 1e and -). Other parsers, Go's among them, refuse
-- those, so a job holding one could not be decoded by its worker. The
-- pattern reads j as a sequence of JSON tokens (JSON_VALID checks how they
-- nest); its atomic groups and possessive quantifiers never backtrack, so
-- it runs in linear time: 17-32 ms on 0.9 MiB of short strings or numbers,
-- where blanking the strings with REGEXP_REPLACE took 21 s.
CREATE FUNCTION {{db}}.spool_json_strict(j LONGTEXT CHARACTER SET utf8mb4) RETURNS BOOLEAN
DETERMINISTIC
RETURN JSON_VALID(j) AND j COLLATE utf8mb4_bin REGEXP
  '^(?>[ \\t\\n\\r]++|"(?>[^"\\\\]++|\\\\(?>["\\\\/bfnrt]|u[0-9a-fA-F]{4}))*+"|[][{}:,]|true|false|null|-?+(?>0|[1-9][0-9]*+)(?>\\.[0-9]++)?+(?>[eE][+-]?+[0-9]++)?+(?![0-9.eE+-]))*+$'
-- statement
DROP PROCEDURE IF EXISTS {{db}}.spool_enqueue
-- statement
-- spool_enqueue is the SQL contract for other languages: CALL it inside your
-- own transaction; the new job's id is LAST_INSERT_ID() afterwards. NULL
-- takes an argument's default (kind has none). It validates like the Go API
-- and signals SQLSTATE 22023 with a message naming the bad argument, writing
-- nothing. Parameters are LONGBLOB, LONGTEXT and DOUBLE so that the
-- caller's session neither truncates nor converts a value on the way in; the
-- routine runs in the strict SQL mode it was created with, whatever the
-- caller's session uses.
CREATE PROCEDURE {{db}}.spool_enqueue(
  IN p_kind         LONGBLOB,
  IN p_args         LONGBLOB,
  IN p_queue        LONGBLOB,
  IN p_priority     DOUBLE,
  IN p_run_at       LONGTEXT CHARACTER SET utf8mb4,
  IN p_max_attempts DOUBLE,
  IN p_tags         LONGBLOB,
  IN p_metadata     LONGBLOB
)
MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_kind LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_args LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_queue LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_priority DOUBLE DEFAULT COALESCE(p_priority, 0);
  DECLARE v_run_at DATETIME(6);
  DECLARE v_max_attempts DOUBLE DEFAULT COALESCE(p_max_attempts, 25);
  DECLARE v_tags LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_tag LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_not_utf8 VARCHAR(16) DEFAULT NULL;
  DECLARE v_message VARCHAR(200);
  DECLARE i INT DEFAULT 0;

  -- Text arrives as bytes (LONGBLOB): a utf8mb4 parameter would be converted
  -- by the caller's session, which in a lax SQL mode replaces invalid UTF-8
  -- with '?' and goes on. Converted here, in the routine's strict mode,
  -- invalid UTF-8 raises error 1300, which names the argument below. UTF-16
  -- surrogates (ED A0..BF ..), which MariaDB's utf8mb4 takes and UTF-8 does
  -- not, are refused as well. Callers send text from a utf8mb4 session.
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1300 SET v_not_utf8 = COALESCE(v_not_utf8, 'kind');
    SET v_kind = CONVERT(p_kind USING utf8mb4);
    IF p_kind REGEXP CONCAT(X'ED', '[', X'A0', '-', X'BF', ']') THEN
      SET v_not_utf8 = COALESCE(v_not_utf8, 'kind');
    END IF;
  END;
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1300 SET v_not_utf8 = COALESCE(v_not_utf8, 'args');
    SET v_args = CONVERT(COALESCE(p_args, '{}') USING utf8mb4);
    IF p_args REGEXP CONCAT(X'ED', '[', X'A0', '-', X'BF', ']') THEN
      SET v_not_utf8 = COALESCE(v_not_utf8, 'args');
    END IF;
  END;
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1300 SET v_not_utf8 = COALESCE(v_not_utf8, 'queue');
    SET v_queue = CONVERT(COALESCE(p_queue, 'default') USING utf8mb4);
    IF p_queue REGEXP CONCAT(X'ED', '[', X'A0', '-', X'BF', ']') THEN
      SET v_not_utf8 = COALESCE(v_not_utf8, 'queue');
    END IF;
  END;
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1300 SET v_not_utf8 = COALESCE(v_not_utf8, 'tags');
    SET v_tags = CONVERT(COALESCE(p_tags, '[]') USING utf8mb4);
    IF p_tags REGEXP CONCAT(X'ED', '[', X'A0', '-', X'BF', ']') THEN
      SET v_not_utf8 = COALESCE(v_not_utf8, 'tags');
    END IF;
  END;
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1300 SET v_not_utf8 = COALESCE(v_not_utf8, 'metadata');
    SET v_metadata = CONVERT(COALESCE(p_metadata, '{}') USING utf8mb4);
    IF p_metadata REGEXP CONCAT(X'ED', '[', X'A0', '-', X'BF', ']') THEN
      SET v_not_utf8 = COALESCE(v_not_utf8, 'metadata');
    END IF;
  END;
  IF v_not_utf8 IS NOT NULL THEN
    SET v_message = CONCAT('spool_enqueue: ', v_not_utf8, ' must be valid UTF-8 (send text from a utf8mb4 session)');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
  END IF;

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

  IF v_kind IS NULL OR CHAR_LENGTH(v_kind) NOT BETWEEN 1 AND 255
     OR v_kind COLLATE utf8mb4_bin REGEXP '[\\x00-\\x1F\\x7F]' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: kind must be 1 to 255 printable characters';
  END IF;
  IF NOT {{db}}.spool_json_strict(v_args) THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: args must be valid JSON nested at most 31 levels deep (MariaDB refuses 32)';
  END IF;
  -- A \u0000 escape not itself escaped (an odd run of backslashes before
  -- "u0000") is a NUL character: PostgreSQL's jsonb cannot hold it, so no
  -- backend takes it (docs/limits.md).
  IF v_args COLLATE utf8mb4_bin REGEXP '(^|[^\\\\])(\\\\\\\\)*\\\\u0000' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: args must not hold the character U+0000 (\\u0000)';
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
  IF NOT {{db}}.spool_json_strict(v_tags) OR JSON_TYPE(v_tags) <> 'ARRAY' OR JSON_LENGTH(v_tags) > 32 THEN
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
  IF NOT {{db}}.spool_json_strict(v_metadata) OR JSON_TYPE(v_metadata) <> 'OBJECT' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: metadata must be a JSON object nested at most 31 levels deep';
  END IF;
  IF v_metadata COLLATE utf8mb4_bin REGEXP '(^|[^\\\\])(\\\\\\\\)*\\\\u0000' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: metadata must not hold the character U+0000 (\\u0000)';
  END IF;

  INSERT INTO {{db}}.spool_jobs (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata, created_at)
  VALUES (v_queue, v_kind, v_args, CAST(v_priority AS SIGNED), v_run_at,
          IF(v_run_at > v_now, 'scheduled', 'available'), CAST(v_max_attempts AS SIGNED), v_tags, v_metadata, v_now);
END
