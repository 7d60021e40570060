-- Throughput: finished jobs of the last ? seconds by bucket of ? seconds
-- (epoch seconds, UTC) and by final state, from the index of finished jobs
-- by finish time; queue ? ('' for every queue).
SELECT FLOOR(TIMESTAMPDIFF(SECOND, '1970-01-01', finalized_at) / ?) * ? AS start,
  SUM(state = 'completed'), SUM(state = 'discarded'), SUM(state = 'cancelled')
FROM {{db}}.spool_jobs
WHERE finalized_at >= UTC_TIMESTAMP(6) - INTERVAL ? SECOND AND finalized_at < {{never}}
  AND state IN ('completed', 'discarded', 'cancelled')
  AND (? = '' OR queue = ?)
GROUP BY start
ORDER BY start
