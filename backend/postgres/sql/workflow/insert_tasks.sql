-- Workflow tasks and batch jobs, with their ids chosen ($1) and their
-- workflow or batch columns.
{{task_rows}}
ON CONFLICT DO NOTHING
RETURNING id
