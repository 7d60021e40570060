-- The rows cleanup deletes: finished past their state's retention. Params:
-- the smallest positive age, then each state's age twice (0 keeps that
-- state); all ages in µs. Included as {{cleanup_due}} by cleanup_select.sql
-- and cleanup.sql, which check the same rows.
finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
  AND ((state = 'completed' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
    OR (state = 'discarded' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
    OR (state = 'cancelled' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND))
  -- A workflow's tasks stay until every one is final, a batch's jobs until
  -- it is finished (docs/workflows.md). The DISTINCT derived table is
  -- materialized, as a DELETE may not read its own table otherwise; it
  -- reads the workflow tasks from spool_job_keys (schema 20), each one's
  -- state from its row.
  AND (workflow_id IS NULL OR workflow_id NOT IN (SELECT x.workflow_id FROM (SELECT DISTINCT k.workflow_id
    FROM {{db}}.spool_job_keys k JOIN {{db}}.spool_jobs t ON t.id = k.job_id
    WHERE k.workflow_id IS NOT NULL AND t.state NOT IN ('completed', 'discarded', 'cancelled')) x))
  AND (batch_id IS NULL OR batch_id NOT IN (SELECT id FROM {{db}}.spool_batches WHERE finished_at IS NULL))
