-- Throughput: finished jobs of the last $1 seconds by bucket of $2 seconds
-- and by final state; queue $3 ('' for every queue). One index-only range
-- scan of spool_jobs_finished (finish time, including state and queue) per
-- bucket: grouping the whole window at once sorted every row of it.
SELECT b.start, c.completed, c.discarded, c.cancelled
FROM generate_series(
  date_bin(make_interval(secs => $2), now() - make_interval(secs => $1), 'epoch'),
  now(), make_interval(secs => $2)) AS b(start)
CROSS JOIN LATERAL (
  SELECT count(*) FILTER (WHERE state = 'completed') AS completed,
    count(*) FILTER (WHERE state = 'discarded') AS discarded,
    count(*) FILTER (WHERE state = 'cancelled') AS cancelled
  FROM {{s}}.spool_jobs
  WHERE state IN ('completed', 'discarded', 'cancelled')
    AND finalized_at >= greatest(b.start, now() - make_interval(secs => $1))
    AND finalized_at < b.start + make_interval(secs => $2)
    AND ($3 = '' OR queue = $3)
) c
WHERE c.completed + c.discarded + c.cancelled > 0
ORDER BY b.start
