-- Spool schema for MySQL/MariaDB, version 1. {{db}} is replaced by the
-- quoted, validated database name. MySQL commits DDL statement by statement,
-- so every statement here can run again after a failed attempt. Statements are
-- separated by lines holding only "-- statement".
--
-- Times are DATETIME(6) holding UTC, always written from UTC_TIMESTAMP(6):
-- never the session's time zone, never the client's clock.
--
-- Indexes: three secondary indexes, none unique. Claims read the claim index
-- with SKIP LOCKED under READ COMMITTED and lock nothing they skip; finishes,
-- heartbeats and deletes touch rows by primary key only (docs/mysql.md,
-- "Why claims and deletes do not deadlock").

CREATE TABLE IF NOT EXISTS {{db}}.spool_jobs (
  id           BIGINT NOT NULL AUTO_INCREMENT,
  state        ENUM('available', 'scheduled', 'retryable', 'running', 'completed', 'discarded', 'cancelled') NOT NULL,
  -- 1 for the pending states: the claim index's second column, so pending
  -- rows of a queue form one contiguous, ordered range (MySQL has no partial
  -- indexes).
  pending      TINYINT AS (state IN ('available', 'scheduled', 'retryable')) STORED,
  priority     SMALLINT NOT NULL,
  attempt      SMALLINT NOT NULL DEFAULT 0,
  max_attempts SMALLINT NOT NULL,
  fence        INT NOT NULL DEFAULT 0,
  run_at       DATETIME(6) NOT NULL,
  created_at   DATETIME(6) NOT NULL,
  leased_until DATETIME(6) NULL,
  attempted_at DATETIME(6) NULL,
  finalized_at DATETIME(6) NULL,
  queue        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  kind         VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  leased_by    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  args         JSON NOT NULL,
  errors       JSON NULL,
  tags         JSON NOT NULL,
  metadata     JSON NOT NULL,
  PRIMARY KEY (id),
  -- Claims: pending rows of a queue in claim order.
  KEY spool_jobs_claim (queue, pending, priority, run_at, id),
  -- Rescue and claim release: only running rows have a lease end.
  KEY spool_jobs_leased (leased_until),
  -- Retention: only finished rows have a finalization time.
  KEY spool_jobs_finalized (finalized_at),
  -- Structural rules hold for every row, however it was written; the full
  -- rules (character sets of queue, kind and tags) are checked by the Go API
  -- and by spool_enqueue.
  CONSTRAINT spool_jobs_queue_length CHECK (CHAR_LENGTH(queue) BETWEEN 1 AND 128),
  CONSTRAINT spool_jobs_kind_length CHECK (CHAR_LENGTH(kind) BETWEEN 1 AND 255),
  CONSTRAINT spool_jobs_priority_range CHECK (priority BETWEEN 0 AND 100),
  CONSTRAINT spool_jobs_max_attempts_range CHECK (max_attempts BETWEEN 1 AND 1000),
  CONSTRAINT spool_jobs_attempt_range CHECK (attempt >= 0),
  CONSTRAINT spool_jobs_tags_array CHECK (JSON_TYPE(tags) = 'ARRAY' AND JSON_LENGTH(tags) <= 32),
  CONSTRAINT spool_jobs_metadata_object CHECK (JSON_TYPE(metadata) = 'OBJECT'),
  CONSTRAINT spool_jobs_lease_when_running CHECK ((state = 'running') = (leased_until IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- statement
CREATE TABLE IF NOT EXISTS {{db}}.spool_leader (
  name       VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  leader_id  VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  elected_at DATETIME(6) NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- statement
DROP PROCEDURE IF EXISTS {{db}}.spool_enqueue
-- statement
-- spool_enqueue is the SQL contract for other languages: CALL it inside your
-- own transaction; the new job's id is LAST_INSERT_ID() afterwards. NULL
-- takes an argument's default (kind has none). It validates like the Go API
-- and signals SQLSTATE 22023 with a message naming the bad argument, writing
-- nothing. Parameters are LONGTEXT and BIGINT so that no value is truncated
-- on the way in; the routine runs in the strict SQL mode it was created with,
-- whatever the caller's session uses.
CREATE PROCEDURE {{db}}.spool_enqueue(
  IN p_kind         LONGTEXT CHARACTER SET utf8mb4,
  IN p_args         LONGTEXT CHARACTER SET utf8mb4,
  IN p_queue        LONGTEXT CHARACTER SET utf8mb4,
  IN p_priority     BIGINT,
  IN p_run_at       DATETIME(6),
  IN p_max_attempts BIGINT,
  IN p_tags         LONGTEXT CHARACTER SET utf8mb4,
  IN p_metadata     LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_args LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_args, '{}');
  DECLARE v_queue LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_queue, 'default');
  DECLARE v_priority BIGINT DEFAULT COALESCE(p_priority, 0);
  DECLARE v_run_at DATETIME(6) DEFAULT COALESCE(p_run_at, UTC_TIMESTAMP(6));
  DECLARE v_max_attempts BIGINT DEFAULT COALESCE(p_max_attempts, 25);
  DECLARE v_tags LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_tags, '[]');
  DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 DEFAULT COALESCE(p_metadata, '{}');
  DECLARE v_tag LONGTEXT CHARACTER SET utf8mb4;
  DECLARE i INT DEFAULT 0;

  IF p_kind IS NULL OR CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 255
     OR p_kind COLLATE utf8mb4_bin REGEXP '[\\x00-\\x1F\\x7F]' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: kind must be 1 to 255 printable characters';
  END IF;
  IF NOT JSON_VALID(v_args) THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: args must be valid JSON';
  END IF;
  IF OCTET_LENGTH(v_args) > 1048576 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: args are over the limit of 1048576 bytes';
  END IF;
  IF NOT (v_queue COLLATE utf8mb4_bin REGEXP '^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}\\z') THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: queue must be 1 to 128 of a-z A-Z 0-9 _ . -, not starting with . or -';
  END IF;
  IF v_priority NOT BETWEEN 0 AND 100 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: priority is out of range 0..100';
  END IF;
  IF v_max_attempts NOT BETWEEN 1 AND 1000 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: max_attempts is out of range 1..1000';
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
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'spool_enqueue: metadata must be a JSON object';
  END IF;

  INSERT INTO {{db}}.spool_jobs (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata, created_at)
  VALUES (v_queue, p_kind, v_args, v_priority, v_run_at,
          IF(v_run_at > v_now, 'scheduled', 'available'), v_max_attempts, v_tags, v_metadata, v_now);
END
