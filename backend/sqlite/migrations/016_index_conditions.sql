-- Partial indexes without IN lists (schema 16). SQLite codes an IN list of
-- more than two constants in a partial index's WHERE as a temporary b-tree
-- built for every row it tests (schema 13 did the same for the pending
-- index and the state's CHECK); a statement that changes the state tests the
-- WHERE of every index naming it, for the row as it was and as it becomes.
-- Same rows in every index (docs/sqlite.md, "The hot path and its costs").
--
-- spool_jobs_finished named `finalized_at IS NOT NULL AND state IN
-- ('completed', 'discarded', 'cancelled')`: a completion that keeps its row
-- tested the IN list for the row as it becomes (finalized_at set), about a
-- third of its instructions. A row has finalized_at exactly while it is
-- completed, discarded or cancelled (every statement that finishes a job
-- sets it, every one that makes a job pending again clears it), so
-- `finalized_at IS NOT NULL` holds the same rows, and a claim, which
-- changes the state but not finalized_at, no longer tests the index at all.
-- Retention's delete (cleanup.sql) names the NULL test; the throughput and
-- awaited-completions reads compare finalized_at, which implies it.
--
-- The flow indexes test the pending states by comparisons, as the pending
-- index does: a job with a flow key built four temporary b-trees at its
-- claim and two at its finish. The flow statements name the same
-- comparisons, as SQLite needs to use a partial index.
--
-- Each index is dropped if present and created again; the migration runs
-- in one transaction, so a failure leaves schema 15 as it was.
DROP INDEX IF EXISTS spool_jobs_finished;
CREATE INDEX spool_jobs_finished ON spool_jobs (finalized_at) WHERE finalized_at IS NOT NULL;

DROP INDEX IF EXISTS spool_jobs_flow;
CREATE INDEX spool_jobs_flow ON spool_jobs (queue, flow_key, priority, run_at, id)
  WHERE flow_key IS NOT NULL AND (state = 'available' OR state = 'scheduled' OR state = 'retryable');

DROP INDEX IF EXISTS spool_jobs_flow_order;
CREATE INDEX spool_jobs_flow_order ON spool_jobs (queue, flow_key, id)
  WHERE flow_key IS NOT NULL AND (state = 'available' OR state = 'scheduled' OR state = 'retryable');
