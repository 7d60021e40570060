-- Queue settings (schema 3). A queue has a row once a setting was made for
-- it; paused_at (microseconds) is set while the queue is paused
-- (Client.QueuePause). Every claim, and the read that precedes it, looks up
-- the row of its queue, so a pause holds in every process from its commit.

CREATE TABLE spool_queues (
  name      TEXT PRIMARY KEY,
  paused_at INTEGER
) STRICT;
