-- Unique jobs (schema 4). unique_key is a hex digest the client computes from
-- the job's kind and the parts its unique options choose; unique_states is
-- the set of states (one bit per state, in lifecycle order) in which the job
-- holds it. The partial unique index holds only the rows that hold a key,
-- and refuses a second holder whatever process inserts it. Its predicate is
-- repeated word for word in unique_holder.sql, so that the lookup uses it.

ALTER TABLE spool_jobs ADD COLUMN unique_key TEXT CHECK (length(unique_key) BETWEEN 1 AND 64);

-- available, scheduled, retryable and running (bits 0 to 3) always hold the
-- key: a job moves among them without an insert that could check it.
ALTER TABLE spool_jobs ADD COLUMN unique_states INTEGER CHECK (unique_states & 15 = 15 AND unique_states < 128);

CREATE UNIQUE INDEX spool_jobs_unique ON spool_jobs (unique_key)
  WHERE unique_key IS NOT NULL AND (unique_states >> (CASE state
    WHEN 'available' THEN 0 WHEN 'scheduled' THEN 1 WHEN 'retryable' THEN 2 WHEN 'running' THEN 3
    WHEN 'completed' THEN 4 WHEN 'discarded' THEN 5 ELSE 6 END)) & 1 = 1;
