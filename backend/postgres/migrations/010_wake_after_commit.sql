-- Wake-ups after commit (schema 10): a NOTIFY sent in an inserting
-- transaction holds PostgreSQL's notification lock from its pre-commit to
-- the end of its commit, WAL flush included, so every notifying commit on
-- the server waits for the one before it (pgbench, 16 clients inserting one
-- row a transaction: 3,500 transactions/s notifying against 14,500 not).
-- Spool's own inserts outside a caller's transaction set spool.wake for
-- their transaction and announce their jobs after the commit, in a
-- transaction that writes nothing to flush ('after'), or not at all ('off');
-- every other insert (a caller's transaction, COPY, SQL) still notifies
-- here, at its commit.
CREATE OR REPLACE FUNCTION {{schema}}.spool_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('spool.wake', true), '') IN ('after', 'off') THEN
    RETURN NULL;
  END IF;
  PERFORM pg_notify({{channel}}, h.queue || ' ' || h.priority || ' ' ||
    floor(extract(epoch FROM h.run_at) * 1000000)::bigint)
  FROM (SELECT DISTINCT ON (queue) queue, priority, run_at
        FROM spool_new_jobs WHERE state = 'available'
        ORDER BY queue, priority, run_at) h;
  RETURN NULL;
END
$$;
