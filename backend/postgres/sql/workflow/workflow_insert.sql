-- $3, $4: the range of the ids its tasks took (schema 27).
INSERT INTO {{s}}.spool_workflows (name, tasks, first_id, last_id) VALUES ($1, $2, $3, $4) RETURNING id
