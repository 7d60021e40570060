-- Flow control (schema 7): a job's flow key, the indexes flow-controlled
-- claims read, and the rate limits' state. Both indexes are partial on
-- pending rows that have a key, so jobs without one cost them nothing:
-- spool_jobs_flow lists the keys with pending jobs (a skip scan, one seek
-- per key) and serves a key's jobs in claim order; spool_jobs_flow_order a
-- key's jobs in insert order (ordered keys). Keys compare bytewise.
ALTER TABLE spool_jobs ADD COLUMN flow_key TEXT CHECK (length(CAST(flow_key AS BLOB)) BETWEEN 1 AND 255);

CREATE INDEX spool_jobs_flow ON spool_jobs (queue, flow_key, priority, run_at, id)
  WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL;

CREATE INDEX spool_jobs_flow_order ON spool_jobs (queue, flow_key, id)
  WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL;

-- Rate limits (GCRA): per queue and key ('' for jobs without a key), the
-- theoretical arrival time of the next start, in microseconds. A time that
-- has passed means the same as no row.
CREATE TABLE spool_flow_rates (
  queue    TEXT NOT NULL,
  flow_key TEXT NOT NULL,
  tat      INTEGER NOT NULL,
  PRIMARY KEY (queue, flow_key)
) WITHOUT ROWID;
