-- Workflows and batches (docs/workflows.md): the state waiting, the
-- columns of a job that waits or is waited for, the edges, the workflows'
-- and batches' records.
--
-- A waiting job (wait_kind 'deps', deps_left > 0) is outside the pending
-- index and every claim, which read only available, scheduled and
-- retryable rows. has_dependents flags a job whose final state others wait
-- for, until its finish has settled them; a plain finish never reads more.
ALTER TABLE spool_jobs ADD COLUMN wait_kind TEXT;
ALTER TABLE spool_jobs ADD COLUMN deps_left INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spool_jobs ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spool_jobs ADD COLUMN workflow_id INTEGER;
ALTER TABLE spool_jobs ADD COLUMN workflow_task TEXT;
ALTER TABLE spool_jobs ADD COLUMN batch_id INTEGER;

-- The state's CHECK takes 'waiting'. SQLite cannot alter a CHECK, so its
-- text in the schema is edited in place (the ALTER TABLE documentation's
-- procedure for changes that existing rows cannot break: every stored
-- state passes the wider CHECK). RESET reloads this connection's schema;
-- the CREATE statements below change the schema cookie, so every other
-- connection reloads it too. The columns are added first, while the
-- stored text is the one SQLite parsed.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '''discarded'', ''cancelled'')', '''discarded'', ''cancelled'', ''waiting'')')
WHERE type = 'table' AND name = 'spool_jobs';
PRAGMA writable_schema = RESET;

CREATE INDEX spool_jobs_workflow ON spool_jobs (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX spool_jobs_batch ON spool_jobs (batch_id, id) WHERE batch_id IS NOT NULL;

CREATE TABLE spool_deps (
  parent_id INTEGER NOT NULL,
  child_id  INTEGER NOT NULL,
  on_fail   INTEGER NOT NULL DEFAULT 0, -- 0 cancel the child, 1 count as done
  PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
CREATE INDEX spool_deps_child ON spool_deps (child_id);

CREATE TABLE spool_workflows (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  name       TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  tasks      INTEGER NOT NULL
) STRICT;

CREATE TABLE spool_batches (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  sealed      INTEGER NOT NULL,
  total       INTEGER NOT NULL DEFAULT 0,
  completed   INTEGER NOT NULL DEFAULT 0,
  discarded   INTEGER NOT NULL DEFAULT 0,
  cancelled   INTEGER NOT NULL DEFAULT 0,
  finished_at INTEGER,
  on_success  INTEGER,
  on_failure  INTEGER,
  on_complete INTEGER
) STRICT;
