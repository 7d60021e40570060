-- Bulk retry, one batch: the first $7 jobs above id $1 that match the
-- filters (queue $2, kind $3, states $4, created in ($5, $6)) and can be
-- retried become available now with a fresh set of attempts. A unique job
-- that would take back a key it does not hold is taken but not changed
-- (flag): the caller retries it alone, where a conflict refuses only it.
-- Rows are locked in id order and waited for (not skipped), so that the
-- batches, which resume after the last id taken, miss none.
WITH taken AS MATERIALIZED (
  SELECT id, (unique_key IS NOT NULL AND NOT {{s}}.spool_holds_key(unique_states, state)) AS flag
  FROM {{s}}.spool_jobs
  WHERE id > $1 AND ($2 = '' OR queue = $2) AND ($3 = '' OR kind = $3)
    AND (cardinality($4::text[]) = 0 OR state::text = ANY($4::text[]))
    AND ($5::timestamptz IS NULL OR created_at > $5) AND ($6::timestamptz IS NULL OR created_at < $6)
    AND state IN ('scheduled', 'retryable', 'completed', 'discarded', 'cancelled')
  ORDER BY id
  LIMIT $7
  FOR UPDATE
), changed AS (
  UPDATE {{s}}.spool_jobs j SET state = 'available', attempt = 0, run_at = now(), finalized_at = NULL
  FROM taken t
  WHERE j.id = t.id AND NOT t.flag
  RETURNING j.id, j.queue, j.priority, j.run_at
)
-- One row per job taken: the changed ones, then the unique ones left for
-- the caller, side by side, never joined (a nested loop over CTE scans;
-- BENCHMARKS.md, "Bulk retry without a join").
SELECT id, false, true, queue, priority, run_at FROM changed
UNION ALL
SELECT id, true, false, '', 0::smallint, NULL::timestamptz FROM taken WHERE flag
