-- Durable steps, waits and signals (schema 15, docs/durable.md). A step's
-- result is written only while its job is running under the writing
-- attempt's fence; a signal is kept from its first send, the first of a
-- name winning. Both go with their job (ON DELETE CASCADE). wait_signal
-- names the signal a parked job waits for. Times by the database's clock
-- (UTC).
CREATE TABLE IF NOT EXISTS {{db}}.spool_steps (
  job_id     BIGINT NOT NULL,
  name       VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  result     LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  fence      INT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  seq        BIGINT NOT NULL AUTO_INCREMENT,
  PRIMARY KEY (job_id, name),
  KEY spool_steps_seq (seq),
  CONSTRAINT spool_steps_job FOREIGN KEY (job_id) REFERENCES {{db}}.spool_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- statement
CREATE TABLE IF NOT EXISTS {{db}}.spool_signals (
  job_id     BIGINT NOT NULL,
  name       VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payload    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (job_id, name),
  CONSTRAINT spool_signals_job FOREIGN KEY (job_id) REFERENCES {{db}}.spool_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- statement
ALTER TABLE {{db}}.spool_jobs ADD COLUMN wait_signal VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL
