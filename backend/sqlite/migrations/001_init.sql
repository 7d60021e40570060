-- Spool schema for SQLite, version 1. Times are integer microseconds since the
-- Unix epoch, UTC. STRICT tables reject values of the wrong type.

CREATE TABLE spool_jobs (
  -- AUTOINCREMENT: an id is never reused, even after the newest row is
  -- deleted, so a stale lease (id, fence) can never match a new job.
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  run_at       INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  leased_until INTEGER,
  attempted_at INTEGER,
  finalized_at INTEGER,
  fence        INTEGER NOT NULL DEFAULT 0,
  state        TEXT NOT NULL DEFAULT 'available' CHECK (state IN
                 ('available', 'scheduled', 'retryable', 'running', 'completed', 'discarded', 'cancelled')),
  priority     INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 100),
  attempt      INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_attempts INTEGER NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
  queue        TEXT NOT NULL DEFAULT 'default' CHECK (length(queue) BETWEEN 1 AND 128),
  kind         TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 255),
  leased_by    TEXT,
  args         TEXT NOT NULL DEFAULT '{}',
  errors       TEXT,                       -- JSON array of attempt errors
  tags         TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
  metadata     TEXT NOT NULL DEFAULT '{}', -- JSON object
  CHECK ((state = 'running') = (leased_until IS NOT NULL))
) STRICT;

-- The hot index: only pending rows, in claim order.
CREATE INDEX spool_jobs_pending ON spool_jobs (queue, priority, run_at, id)
  WHERE state IN ('available', 'scheduled', 'retryable');

-- Rescue finds expired leases here.
CREATE INDEX spool_jobs_leased ON spool_jobs (leased_until)
  WHERE state = 'running';

-- Retention finds old finished rows here.
CREATE INDEX spool_jobs_finished ON spool_jobs (finalized_at)
  WHERE state IN ('completed', 'discarded', 'cancelled');

CREATE TABLE spool_leader (
  name       TEXT PRIMARY KEY,
  leader_id  TEXT NOT NULL,
  elected_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
