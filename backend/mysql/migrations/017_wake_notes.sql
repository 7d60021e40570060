-- Wake-up notes (schema 17). MySQL has no notifications, so what
-- PostgreSQL's worker processes tell each other by NOTIFY to route
-- wake-ups (backend.WakeRouter: each process's queues, announced while it
-- listens; a wake-up passed on to the other processes) is appended here,
-- and every process's Listen reads the rows above the last seq it saw
-- when its look finds a higher one. Rows are hints: one committed out of
-- seq order may be skipped, which costs a claim or leaves a job to the
-- next poll. Old rows are deleted by the writers (wake_notes_prune).
CREATE TABLE {{db}}.spool_wake_notes (
  seq  BIGINT NOT NULL AUTO_INCREMENT,
  body VARCHAR(8000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  PRIMARY KEY (seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
