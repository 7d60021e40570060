-- Debounced keys (schema 12, UniqueOpts.Debounce): one row per key names
-- the key's current job, the last one an insert of the key made. An insert
-- locks the key's row (made if needed), so the inserts of one key from
-- every process run one at a time: each either moves the current job's run
-- time while that job is pending or makes a new job and points the row at
-- it. The key is kept here rather than in spool_jobs' unique index because
-- a running job and the next cycle's pending job share it. A table of its
-- own: nothing of spool_jobs changes.
CREATE TABLE IF NOT EXISTS {{db}}.spool_debounce (
  debounce_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job_id       BIGINT NULL,
  started_at   DATETIME(6) NOT NULL,
  PRIMARY KEY (debounce_key)
) ENGINE = InnoDB
