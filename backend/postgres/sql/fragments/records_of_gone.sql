-- The deletes of the durable records (steps, step sets, signals) of the
-- jobs of the CTE gone (column id): how every statement that deletes jobs,
-- or the records of jobs already deleted, takes their records, so that a
-- table of records is named here and in the delete trigger only.
steps_gone AS (
  DELETE FROM {{s}}.spool_steps t USING gone g WHERE t.job_id = g.id
),
sets_gone AS (
  DELETE FROM {{s}}.spool_step_sets t USING gone g WHERE t.job_id = g.id
),
signals_gone AS (
  DELETE FROM {{s}}.spool_signals t USING gone g WHERE t.job_id = g.id
)
