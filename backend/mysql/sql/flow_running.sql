-- The flow claim's clock (used for every time it decides on and writes),
-- whether queue ? is paused, and the queue's running jobs by flow key:
-- leases not ended at that clock, and all. One row with NULL key columns
-- when nothing runs. Running rows of a queue are one range of the claim
-- index (phase 2). Params: the queue, twice.
SELECT c.now, c.paused, r.fkey, coalesce(r.live, 0), coalesce(r.total, 0)
FROM (SELECT UTC_TIMESTAMP(6) AS now,
        EXISTS (SELECT 1 FROM {{db}}.spool_queues WHERE name = ? AND paused_at IS NOT NULL) AS paused) c
LEFT JOIN (
  SELECT coalesce(flow_key, '') AS fkey, sum(leased_until > UTC_TIMESTAMP(6)) AS live, count(*) AS total
  FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
  WHERE phase = 2 AND queue = ?
  GROUP BY 1
) r ON TRUE
