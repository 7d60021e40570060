-- The finished rows' index names no state (schema 16). Its WHERE was
-- `finalized_at IS NOT NULL AND state IN ('completed', 'discarded',
-- 'cancelled')`; SQLite codes an IN list of more than two constants in a
-- partial index's WHERE as a temporary b-tree built for every row it tests,
-- and a completion that keeps its row tests it for the row as it becomes
-- (finalized_at set, so the NULL test passes): about a third of the
-- instructions of a kept completion (docs/sqlite.md, "The hot path and its
-- costs"). A row has finalized_at exactly while it is completed, discarded
-- or cancelled (every statement that finishes a job sets it, every one that
-- makes a job pending again clears it), so `finalized_at IS NOT NULL` holds
-- the same rows, and a claim, which changes the state but not finalized_at,
-- no longer tests it at all. Retention's delete (cleanup.sql) names the
-- NULL test; the throughput and awaited-completions reads compare
-- finalized_at, which implies it. Dropped if present and created again: the
-- migration runs in one transaction, and re-running it is harmless.
DROP INDEX IF EXISTS spool_jobs_finished;
CREATE INDEX spool_jobs_finished ON spool_jobs (finalized_at) WHERE finalized_at IS NOT NULL;
