-- Debounced keys (UniqueOpts.Debounce): one row per key names the key's
-- current job, the last one an insert of the key made. The file's one
-- writer already runs the inserts of a key one at a time; each either
-- moves the current job's run time while that job is pending or makes a
-- new job and points the row at it. The key is kept here rather than in
-- spool_jobs' unique index because a running job and the next cycle's
-- pending job share it. started_at is in microseconds since the epoch.
CREATE TABLE spool_debounce (
  key        TEXT PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 64),
  job_id     INTEGER,
  started_at INTEGER NOT NULL
) WITHOUT ROWID;
