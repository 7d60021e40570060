-- Striped flow claims (schema 9): far from its limits, a flow claim holds
-- the queue's flow lock row (spool_flow_rates, key '') shared and one of a
-- few stripe rows here exclusively, so claims of several processes run side
-- by side; a claim near a limit writes the lock row and so excludes them
-- all. Rows are created on first use.
CREATE TABLE IF NOT EXISTS {{db}}.spool_flow_stripes (
  queue  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  stripe SMALLINT NOT NULL,
  PRIMARY KEY (queue, stripe)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
