-- Insert notifications carry a lower bound of the claim keys the statement
-- inserted into each queue: "QUEUE PRIORITY RUN_AT_US", the lowest priority
-- number and, within it, the earliest run_at in microseconds since the
-- epoch, so that a listener can lower its claim floor below a job committed
-- after its claims had passed that key. The id is left out on purpose:
-- statements of one transaction that insert with the default run_at (the
-- transaction's start) send the same payload, which PostgreSQL folds into
-- one notification.
CREATE OR REPLACE FUNCTION {{schema}}.spool_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify({{channel}}, h.queue || ' ' || h.priority || ' ' ||
    floor(extract(epoch FROM h.run_at) * 1000000)::bigint)
  FROM (SELECT DISTINCT ON (queue) queue, priority, run_at
        FROM spool_new_jobs WHERE state = 'available'
        ORDER BY queue, priority, run_at) h;
  RETURN NULL;
END
$$;
