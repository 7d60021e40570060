-- Throughput: finished jobs of the last $1 seconds by bucket of $2
-- seconds and by final state, from the index of finished jobs by finish
-- time; queue $3 ('' for every queue).
SELECT to_timestamp(floor(extract(epoch FROM finalized_at) / $2) * $2) AS start,
  count(*) FILTER (WHERE state = 'completed'),
  count(*) FILTER (WHERE state = 'discarded'),
  count(*) FILTER (WHERE state = 'cancelled')
FROM {{s}}.spool_jobs
WHERE state IN ('completed', 'discarded', 'cancelled')
  AND finalized_at >= now() - make_interval(secs => $1)
  AND ($3 = '' OR queue = $3)
GROUP BY 1
ORDER BY 1
