-- The first flow key after ? with pending jobs in queue ?: one seek of
-- spool_jobs_flow (flow_wait is the key of a pending job, NULL
-- otherwise). FlowKeys repeats it key after key (a skip scan): MariaDB
-- plans the recursive CTE form's correlated step as a scan of the queue's
-- whole prefix. Params: queue, after.
SELECT flow_wait FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_flow)
WHERE queue = ? AND flow_wait > ?
ORDER BY flow_wait
LIMIT 1
