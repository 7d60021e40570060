-- Periodic jobs (schema 11): each periodic job that a leader of the
-- store's clients declares, recorded by it (backend.PeriodicRecordParams),
-- listed by Client.PeriodicRecords. since, the slots and started_at are by
-- the leader's clock, seen_at by the database's (UTC). A row is never
-- deleted: one whose seen_at stopped moving is declared by no leader.
CREATE TABLE IF NOT EXISTS {{db}}.spool_periodic (
  name       VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  schedule   TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  queue      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  since      DATETIME(6) NOT NULL,
  last_slot  DATETIME(6) NULL,
  next_slot  DATETIME(6) NULL,
  started_at DATETIME(6) NULL,
  seen_at    DATETIME(6) NOT NULL,
  PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
