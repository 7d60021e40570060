-- Queue settings (schema 4). A queue has a row once a setting was made for
-- it; paused_at is set while the queue is paused (Client.QueuePause). Every
-- claim reads the row of its queue by primary key (a plain read: a claim's
-- FOR UPDATE does not lock it), so a pause holds in every process from its
-- commit.
CREATE TABLE {{db}}.spool_queues (
  name      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  paused_at DATETIME(6) NULL,
  PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
