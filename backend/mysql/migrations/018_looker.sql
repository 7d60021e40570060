-- The looker's lease (schema 18). MySQL has no notifications, so worker
-- processes learn of jobs other processes inserted by reading the ids
-- above the last one they saw; with every process reading them every few
-- milliseconds while jobs come, an 8-process fleet sent the server eight
-- times the reads of one process for the same jobs. One process at a
-- time, the holder of this row's lease, reads them fast and claims for
-- the new jobs; the others look at the row now and then, and take the
-- lease when it lapses (its holder stopped, or went idle and gave it
-- up), or when its holder has no idle worker (slow = 1) and they have.
-- cursor is the highest job id the holder has read: a process that takes
-- the lease goes on from there, so no job inserted between two holders is
-- missed. Times are the server's clock. One row per set of queues the
-- processes work (set_key, a hash of the queue names; '' for a process
-- that named none), made by the first process of the set to listen:
-- processes that work other queues read the new jobs for themselves.
CREATE TABLE IF NOT EXISTS {{db}}.spool_looker (
  set_key     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  holder      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  until       DATETIME(6) NOT NULL,
  cursor_id   BIGINT NOT NULL,
  slow        TINYINT NOT NULL,
  PRIMARY KEY (set_key)
) ENGINE = InnoDB
