-- The first flow key after ? with pending jobs in queue ?: one seek of
-- spool_jobs_flow. FlowKeys repeats it key after key (a skip scan):
-- MariaDB plans the recursive CTE form's correlated step as a scan of the
-- queue's whole prefix. Params: queue, after.
SELECT flow_key FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_flow)
WHERE queue = ? AND pending = 1 AND flow_key > ?
ORDER BY flow_key
LIMIT 1
