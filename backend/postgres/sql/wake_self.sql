-- The notification of a job inserted alone by this session, sent right
-- after the insert's commit in a transaction of its own (insert_self.go):
-- the job the session's last nextval of the jobs' ids made, in the insert
-- trigger's format, if it is still waiting to run. Its transaction writes
-- no WAL, so its commit flushes nothing and holds the notification lock
-- only briefly, as the waker's does. The sequence is the identity column's
-- (schema 1), named as a literal so that it is looked up once, when the
-- statement is prepared, not at every call as pg_get_serial_sequence is;
-- currval in a subquery of its own, run once, since a volatile function
-- compared with a column is evaluated for every row and makes the lookup
-- a scan of the whole table.
SELECT pg_notify($1, j.queue || ' ' || j.priority || ' ' || floor(extract(epoch FROM j.run_at) * 1000000)::bigint)
FROM {{s}}.spool_jobs j
WHERE j.id = (SELECT currval('{{s}}.spool_jobs_id_seq')) AND j.state = 'available'
