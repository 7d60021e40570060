-- Flow take of an ordered key: its oldest pending job, locked without
-- SKIP LOCKED (a locked head must not let the next job pass it); the
-- caller takes it only if it is due. Params: queue, key.
SELECT {{cols}} FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_flow_order)
WHERE queue = ? AND flow_wait = ?
ORDER BY id
LIMIT 1
FOR UPDATE
