-- Debounced keys (UniqueOpts.Debounce). One row per key names the key's
-- current job, the last one an insert of the key made. An insert locks the
-- key's row (an upsert), so the inserts of one key from every process run
-- one at a time: each either moves the current job's run time while that
-- job is pending or makes a new job and points the row at it. The key is
-- kept here rather than in spool_jobs' unique index because a running job
-- and the next cycle's pending job share it. Rows of keys whose job is no
-- longer pending are deleted by the cleanup an hour after their cycle
-- began; a deleted row only means the next insert starts a new cycle.
CREATE TABLE {{schema}}.spool_debounce (
  key        text PRIMARY KEY CHECK (octet_length(key) BETWEEN 1 AND 64),
  job_id     bigint,
  started_at timestamptz NOT NULL DEFAULT now()
);
