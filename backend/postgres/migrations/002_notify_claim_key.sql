-- Insert notifications carry the lowest claim key (priority, run_at in
-- microseconds since the epoch, id) the statement inserted into each queue,
-- "QUEUE PRIORITY RUN_AT_US ID", so that a listener can lower its claim
-- floor below a job committed after its claims had passed that key.
CREATE OR REPLACE FUNCTION {{schema}}.spool_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify({{channel}}, h.queue || ' ' || h.priority || ' ' ||
    floor(extract(epoch FROM h.run_at) * 1000000)::bigint || ' ' || h.id)
  FROM (SELECT DISTINCT ON (queue) queue, priority, run_at, id
        FROM spool_new_jobs WHERE state = 'available'
        ORDER BY queue, priority, run_at, id) h;
  RETURN NULL;
END
$$;
