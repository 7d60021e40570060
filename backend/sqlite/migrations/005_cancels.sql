-- Cancellation events (schema 5). SQLite has no notifications between
-- processes, so cancelling a running job also appends its id here, in the
-- same transaction; every process's watcher reads the rows added since its
-- last look (at most watchInterval after the commit) and stops the handler
-- if it holds the job. Writes are serialised, so seq grows in commit order,
-- and AUTOINCREMENT never reuses one after old rows are deleted. Rows older
-- than a minute are deleted by the next cancellation: the lease holder's
-- heartbeat has found the cancellation by then.
CREATE TABLE spool_cancels (
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  at     INTEGER NOT NULL
) STRICT;
