-- The queue's shared claim floor (schema 31): the claim-order key of the
-- last job a claim under the queue's claim lock took, written by that
-- claim and read by the next one, whichever process sends it (claim.sql,
-- floor.go). A process's own floor is where its own last claim ended;
-- when several processes take turns on a backlog, every other process's
-- claims since then lie above it, claimed rows whose pending-index
-- entries stay until VACUUM, and its next claim walked them all. Unlogged:
-- it is only a hint a crash may empty (a claim then starts at its own
-- floor), and writing it costs no WAL.
CREATE UNLOGGED TABLE {{schema}}.spool_claim_floors (
  queue    text PRIMARY KEY,
  priority smallint NOT NULL,
  run_at   timestamptz NOT NULL,
  id       bigint NOT NULL
);
