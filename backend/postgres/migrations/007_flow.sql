-- Flow control (schema 7): a job's flow key, the indexes flow-controlled
-- claims read, and the rate limits' state.
--
-- Both indexes are partial on pending rows that have a key, so jobs without
-- one (every job of a queue without per-key rules) cost them nothing.
-- spool_jobs_flow serves the listing of keys with pending jobs (a skip scan
-- by recursive CTE, one descent per key) and a key's jobs in claim order;
-- spool_jobs_flow_order a key's jobs in insert order (ordered keys).
-- Keys compare bytewise (COLLATE "C"), as the flow controller orders them.
ALTER TABLE {{schema}}.spool_jobs ADD COLUMN flow_key text COLLATE "C"
  CONSTRAINT spool_jobs_flow_key_length CHECK (octet_length(flow_key) BETWEEN 1 AND 255);

CREATE INDEX spool_jobs_flow ON {{schema}}.spool_jobs (queue, flow_key, priority, run_at, id)
  WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL;

CREATE INDEX spool_jobs_flow_order ON {{schema}}.spool_jobs (queue, flow_key, id)
  WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL;

-- Rate limits (GCRA): per queue and key, the theoretical arrival time of
-- the next start. '' is the bucket of jobs without a key. A row whose time
-- has passed means the same as no row.
CREATE TABLE {{schema}}.spool_flow_rates (
  queue    text NOT NULL,
  flow_key text COLLATE "C" NOT NULL,
  tat      timestamptz NOT NULL,
  PRIMARY KEY (queue, flow_key)
);
