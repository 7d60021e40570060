-- Rate state of flow keys $2 of queue $1.
SELECT flow_key, tat FROM {{s}}.spool_flow_rates WHERE queue = $1 AND flow_key = ANY($2::text[])
