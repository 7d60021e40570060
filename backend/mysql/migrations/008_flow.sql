-- Flow control (schema 8): a job's flow key, the indexes flow-controlled
-- claims read, and the rate limits' state. MySQL has no partial indexes:
-- spool_jobs_flow lists the keys with pending jobs (a skip scan, one seek
-- per key) and serves a key's jobs in claim order; spool_jobs_flow_order
-- (InnoDB appends the primary key) a key's jobs in insert order. Keys
-- compare bytewise (utf8mb4_bin orders by code point, as UTF-8 bytes do).
ALTER TABLE {{db}}.spool_jobs
  ADD COLUMN flow_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  ADD KEY spool_jobs_flow (queue, pending, flow_key, priority, run_at, id),
  ADD KEY spool_jobs_flow_order (queue, pending, flow_key),
  ADD CONSTRAINT spool_jobs_flow_key_length CHECK (LENGTH(flow_key) BETWEEN 1 AND 255)
-- statement
-- Rate limits (GCRA): per queue and key, the theoretical arrival time of the
-- next start; a time that has passed means the same as no row. The row of
-- key '' (the bucket of jobs without a key) is also the queue's flow lock:
-- a flow claim writes it first, and holds it to its commit.
CREATE TABLE IF NOT EXISTS {{db}}.spool_flow_rates (
  queue    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  flow_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  tat      DATETIME(6) NOT NULL,
  PRIMARY KEY (queue, flow_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
