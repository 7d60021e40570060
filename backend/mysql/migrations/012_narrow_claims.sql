-- Claims that move one index entry (schema 12). A claim, a finish or a
-- heartbeat costs InnoDB one change for every secondary index whose
-- columns it changes, and on version 11 a claim of a job without a flow
-- key changed four: spool_jobs_claim, spool_jobs_leased (its lease end) and
-- both flow indexes (they began with the pending flag). Now:
-- - phase replaces pending: 1 pending, 2 running, 0 finished. Running rows
--   are a range of spool_jobs_claim (phase, queue, …), so rescue, claim
--   release and flow claims find them there and the lease index goes:
--   claims and heartbeats no longer move an entry for the lease end.
-- - flow_wait is the flow key of a pending job, NULL otherwise: the flow
--   indexes hold it instead of (pending, flow_key), so a job without a key
--   keeps one unchanging entry (queue, NULL, …) in each while it is
--   claimed and finished; only a keyed job's entries move when it is.
-- One statement, so that a failed attempt leaves nothing to undo; InnoDB
-- rebuilds the table (the generated columns are stored).
ALTER TABLE {{db}}.spool_jobs
  ADD COLUMN phase TINYINT AS (CASE
    WHEN state IN ('available', 'scheduled', 'retryable') THEN 1
    WHEN state = 'running' THEN 2
    ELSE 0 END) STORED,
  ADD COLUMN flow_wait VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
    AS (IF(state IN ('available', 'scheduled', 'retryable'), flow_key, NULL)) STORED,
  DROP KEY spool_jobs_claim,
  DROP KEY spool_jobs_leased,
  DROP KEY spool_jobs_flow,
  DROP KEY spool_jobs_flow_order,
  DROP COLUMN pending,
  -- Claims: a queue's pending rows in claim order (phase 1); rescue, claim
  -- release and flow claims: running rows (phase 2), of a queue or all.
  ADD KEY spool_jobs_claim (phase, queue, priority, run_at, id),
  -- Flow claims: the keys with pending jobs (a skip scan) and a key's
  -- pending jobs in claim order.
  ADD KEY spool_jobs_flow (queue, flow_wait, priority, run_at, id),
  -- Ordered flow keys: a key's pending jobs in insert order (InnoDB
  -- appends the primary key).
  ADD KEY spool_jobs_flow_order (queue, flow_wait)
