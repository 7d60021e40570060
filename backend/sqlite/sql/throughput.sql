-- Throughput: jobs finished since ?1 (microseconds) by bucket of ?2
-- microseconds and by final state, from the index of finished jobs by
-- finish time; queue ?3 ('' for every queue).
SELECT finalized_at / ?2 * ?2 AS start,
  SUM(state = 'completed'), SUM(state = 'discarded'), SUM(state = 'cancelled')
FROM spool_jobs
WHERE finalized_at >= ?1 AND state IN ('completed', 'discarded', 'cancelled')
  AND (?3 = '' OR queue = ?3)
GROUP BY start
ORDER BY start
