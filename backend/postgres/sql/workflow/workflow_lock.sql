-- A workflow's row, locked: its cancel and its retry run one at a time.
SELECT id FROM {{s}}.spool_workflows WHERE id = $1 FOR UPDATE
