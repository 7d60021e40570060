-- Periodic jobs (schema 18): each periodic job that a leader of the
-- store's clients declares, recorded by it (backend.PeriodicRecordParams),
-- listed by Client.PeriodicRecords. since, the slots and started_at are by
-- the leader's clock, seen_at by the database's. A row is never deleted:
-- one whose seen_at stopped moving is declared by no leader.
CREATE TABLE {{schema}}.spool_periodic (
  name       text PRIMARY KEY,
  schedule   text NOT NULL,
  queue      text NOT NULL,
  since      timestamptz NOT NULL,
  last_slot  timestamptz,
  next_slot  timestamptz,
  started_at timestamptz,
  seen_at    timestamptz NOT NULL
);
