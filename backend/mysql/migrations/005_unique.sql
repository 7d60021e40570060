-- Unique jobs (schema 5). unique_key is a hex digest the client computes from
-- the job's kind and the parts its unique options choose; unique_states is
-- the set of states (one bit per state, in the ENUM's order) in which the
-- job holds it. MySQL has no partial indexes, so unique_active holds the key
-- only while the job holds it (NULL otherwise, and NULLs never collide) and
-- the unique index on it refuses a second holder, whatever process inserts
-- it. One statement, so that a failed attempt leaves nothing to undo.
ALTER TABLE {{db}}.spool_jobs
  ADD COLUMN unique_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
  ADD COLUMN unique_states TINYINT UNSIGNED NULL,
  -- state - 1 is the state's position in the ENUM, from 0.
  ADD COLUMN unique_active VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin
    AS (IF((unique_states >> (state - 1)) & 1, unique_key, NULL)) STORED,
  ADD UNIQUE KEY spool_jobs_unique (unique_active),
  ADD CONSTRAINT spool_jobs_unique_key_length CHECK (CHAR_LENGTH(unique_key) BETWEEN 1 AND 64),
  -- available, scheduled, retryable and running (bits 0 to 3) always hold
  -- the key: a job moves among them without an insert that could check it.
  ADD CONSTRAINT spool_jobs_unique_states CHECK (unique_states & 15 = 15 AND unique_states < 128)
