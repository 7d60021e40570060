-- Bulk cancel, one batch: the first $7 pending or running jobs above id $1
-- that match the filters (queue $2, kind $3, states $4, created in
-- ($5, $6)) are cancelled. flag marks the ones that were running, whose
-- holders the caller notifies. Locked in id order and waited for, as in
-- bulk_retry.sql.
WITH taken AS MATERIALIZED (
  SELECT id, state = 'running' AS flag
  FROM {{s}}.spool_jobs
  WHERE id > $1 AND ($2 = '' OR queue = $2) AND ($3 = '' OR kind = $3)
    AND (cardinality($4::text[]) = 0 OR state::text = ANY($4::text[]))
    AND ($5::timestamptz IS NULL OR created_at > $5) AND ($6::timestamptz IS NULL OR created_at < $6)
    AND state IN ('waiting', 'available', 'scheduled', 'retryable', 'running')
  ORDER BY id
  LIMIT $7
  FOR UPDATE
), changed AS (
  UPDATE {{s}}.spool_jobs j SET state = 'cancelled', finalized_at = now(), leased_until = NULL, leased_by = NULL, wait_kind = NULL
  FROM taken t
  WHERE j.id = t.id
  RETURNING j.id, t.flag
)
-- One row per job taken (every one taken is locked, so it is changed).
SELECT id, flag, true, ''::text, 0::smallint, NULL::timestamptz FROM changed
