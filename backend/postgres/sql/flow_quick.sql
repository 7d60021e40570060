-- The head of a flow claim under a global limit alone (FlowQuick): not a
-- statement of its own. buildQueries puts it in front of claim.sql's CTEs
-- and has that claim take (SELECT n FROM allowed) jobs instead of $2, so
-- the whole claim is one statement ($2 for workers, $8 for prefetch, $9
-- the limit), sent with the lock in one round trip. allowed is the rule of
-- internal/flow: the workers' part fits in the limit's free slots, the
-- prefetch only in the lower half of them.
WITH live AS MATERIALIZED (
  SELECT count(*)::int AS n FROM {{s}}.spool_jobs
  WHERE leased_until IS NOT NULL AND state = 'running' AND queue = $1 AND leased_until > now()
),
allowed AS MATERIALIZED (
  SELECT w + least($8::int, greatest(0, ($9::int + 1) / 2 - n - w)) AS n
  FROM (SELECT greatest(least($2::int, $9::int - n), 0) AS w, n FROM live) b
)
