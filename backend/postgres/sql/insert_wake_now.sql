-- insert_wake_after.sql announcing its job in its own transaction: the
-- trigger still sends nothing (spool.wake 'after'), and the statement
-- notifies channel $11 with the job's claim key, in the trigger's format
-- (parseInsertNotice) followed by the job's id (noticeIDs), when the job is
-- due now. The notification goes
-- out at the commit, with no transaction and round trip of its own
-- afterwards (the waker's). Sent only for one job, by a backend with no
-- other insert in flight (Backend.inserting): a notifying commit holds
-- the server's notification lock across its WAL flush, so inserts that
-- overlap leave their wake-ups to the waker rather than commit one at a
-- time.
WITH spool_wake AS MATERIALIZED (SELECT set_config('spool.wake', 'after', true)),
ins AS (
{{insert_rows}}
) t CROSS JOIN spool_wake
ORDER BY t.ord
RETURNING id, run_at, state, queue, priority
)
-- The subquery runs once per due row; the fourth column is read, so
-- the call is never left out of the plan.
SELECT ins.id, false, ins.run_at,
  CASE WHEN ins.state = 'available' THEN
    (SELECT true FROM pg_notify($11, ins.queue || ' ' || ins.priority || ' ' || floor(extract(epoch FROM ins.run_at) * 1000000)::bigint || ' ' || ins.id))
  ELSE false END
FROM ins
