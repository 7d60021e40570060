-- Queue settings (schema 4). A queue has a row once a setting was made for
-- it; paused_at is set while the queue is paused (Client.QueuePause). Every
-- claim reads the row of its queue by primary key, so a pause holds in
-- every process from its commit, whether or not the process heard of it.
CREATE TABLE {{schema}}.spool_queues (
  name      text PRIMARY KEY,
  paused_at timestamptz
);
