-- Periodic jobs (schema 8): each periodic job that a leader of the store's
-- clients declares, recorded by it (backend.PeriodicRecordParams), listed
-- by Client.PeriodicRecords. Times in microseconds: since, the slots and
-- started_at by the leader's clock, seen_at by the store's. A row is never
-- deleted: one whose seen_at stopped moving is declared by no leader.
CREATE TABLE spool_periodic (
  name       TEXT PRIMARY KEY,
  schedule   TEXT NOT NULL,
  queue      TEXT NOT NULL,
  since      INTEGER NOT NULL,
  last_slot  INTEGER,
  next_slot  INTEGER,
  started_at INTEGER,
  seen_at    INTEGER NOT NULL
) STRICT;
