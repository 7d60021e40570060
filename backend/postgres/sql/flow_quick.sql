-- A flow claim under a global limit, a per-key limit alone, or both
-- (backend.FlowQuick): claim_in_place.sql's claim, taking (SELECT n FROM
-- allowed) jobs instead of $2, behind a head (live, granted, allowed) that
-- decides how many, so the whole claim is one statement ($2 for workers,
-- $8 for prefetch, $9 the global limit or 0, $10 the per-key limit or 0,
-- $11 the stripes or 0), sent with the lock in one round trip.
-- granted is the rule of internal/flow: the workers' part fits in the
-- global limit's free slots, the prefetch only in the lower half of them;
-- holding the whole lock, nothing is taken when the busiest key (NULL, the
-- jobs without a key, counting as one) could pass the per-key limit with
-- all that was asked for. allowed applies the striped rule when the claim
-- holds a stripe: at most each limit's share of its lower half
-- (limit / (2 * stripes)), and nothing unless the running jobs leave room
-- for every stripe's share.
WITH live AS MATERIALIZED (
  SELECT coalesce(sum(c), 0)::int AS n, coalesce(max(c), 0)::int AS busiest FROM (
    SELECT sum(c) AS c FROM (
      SELECT flow_key, count(*) AS c FROM {{s}}.spool_jobs
      WHERE leased_until IS NOT NULL AND state = 'running' AND queue = $1 AND leased_until > now()
      GROUP BY flow_key
      UNION ALL -- jobs in lease rows have no flow key (claim.sql)
      SELECT NULL, cardinality(ids) - cardinality(done) FROM {{s}}.spool_leases
      WHERE queue = $1 AND leased_until > now()
    ) r
    GROUP BY flow_key
  ) k
),
granted AS MATERIALIZED (
  SELECT CASE
    WHEN $11::int = 0 AND $10::int > 0 AND busiest + $2::int + $8::int > $10::int THEN 0
    WHEN $9::int = 0 THEN $2::int + $8::int
    ELSE w + least($8::int, greatest(0, ($9::int + 1) / 2 - n - w)) END AS g, n, busiest
  FROM (SELECT greatest(least($2::int, $9::int - n), 0) AS w, n, busiest FROM live) b
),
allowed AS MATERIALIZED (
  SELECT CASE
    WHEN $11::int = 0 THEN g
    WHEN $9::int > 0 AND $9::int - n < $11::int * ($9::int / (2 * $11::int)) THEN 0
    WHEN $10::int > 0 AND $10::int - busiest < $11::int * ($10::int / (2 * $11::int)) THEN 0
    ELSE least(g,
      CASE WHEN $9::int > 0 THEN $9::int / (2 * $11::int) ELSE g END,
      CASE WHEN $10::int > 0 THEN $10::int / (2 * $11::int) ELSE g END) END AS n
  FROM granted
),
ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
higher AS MATERIALIZED (
  SELECT id, ctid AS tid, false AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND priority < $5::smallint
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT (SELECT n FROM allowed)
  FOR UPDATE SKIP LOCKED
),
above AS MATERIALIZED (
  SELECT id, ctid AS tid, false AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND (priority, run_at, id) > ($5::smallint, $6::timestamptz, $7::bigint)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT (SELECT n FROM allowed) - (SELECT count(*) FROM higher)
  FOR UPDATE SKIP LOCKED
),
-- claim_in_place.sql's arms, every job kept in place: a quick flow claim
-- counts running jobs in spool_jobs (TestClaimVariants holds the rest of
-- this statement to claim_in_place.sql's). Each of the two writes below
-- takes only its own jobs.
{{claim_write}}
