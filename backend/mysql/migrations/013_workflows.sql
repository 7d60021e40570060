-- Workflows and batches (schema 12, docs/workflows.md): the state waiting,
-- the columns of a job that waits or is waited for, the edges, the
-- workflows' and batches' records. Additive: waiting is appended to the
-- state ENUM (so pending, 0 for it, and unique_active, whose bit 7 no
-- unique job sets, keep their meaning), the new columns are nullable or
-- defaulted.
--
-- A waiting job (wait_kind 'deps', deps_left > 0) is outside the claim
-- index's pending range and every claim. has_dependents flags a job whose
-- final state others wait for, until its finish has settled them.
ALTER TABLE {{db}}.spool_jobs
  MODIFY COLUMN state ENUM('available', 'scheduled', 'retryable', 'running', 'completed', 'discarded', 'cancelled', 'waiting') NOT NULL,
  ADD COLUMN wait_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL,
  ADD COLUMN deps_left INT NOT NULL DEFAULT 0,
  ADD COLUMN has_dependents TINYINT NOT NULL DEFAULT 0,
  ADD COLUMN workflow_id BIGINT NULL,
  ADD COLUMN workflow_task VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  ADD COLUMN batch_id BIGINT NULL,
  ADD KEY spool_jobs_workflow (workflow_id),
  ADD KEY spool_jobs_batch (batch_id, id),
  ADD KEY spool_jobs_unsettled (has_dependents)
-- statement
CREATE TABLE IF NOT EXISTS {{db}}.spool_deps (
  parent_id BIGINT NOT NULL,
  child_id  BIGINT NOT NULL,
  on_fail   TINYINT NOT NULL DEFAULT 0,
  PRIMARY KEY (parent_id, child_id),
  KEY spool_deps_child (child_id)
) ENGINE = InnoDB
-- statement
CREATE TABLE IF NOT EXISTS {{db}}.spool_workflows (
  id         BIGINT NOT NULL AUTO_INCREMENT,
  name       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  created_at DATETIME(6) NOT NULL,
  tasks      INT NOT NULL,
  PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- statement
CREATE TABLE IF NOT EXISTS {{db}}.spool_batches (
  id          BIGINT NOT NULL AUTO_INCREMENT,
  name        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  created_at  DATETIME(6) NOT NULL,
  sealed      TINYINT NOT NULL,
  total       INT NOT NULL DEFAULT 0,
  completed   INT NOT NULL DEFAULT 0,
  discarded   INT NOT NULL DEFAULT 0,
  cancelled   INT NOT NULL DEFAULT 0,
  finished_at DATETIME(6) NULL,
  on_success  BIGINT NULL,
  on_failure  BIGINT NULL,
  on_complete BIGINT NULL,
  PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
