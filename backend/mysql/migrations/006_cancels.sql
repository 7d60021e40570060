-- Cancellation events (schema 6). MySQL has no notifications, so cancelling
-- a running job also appends its id here, in the same transaction, and every
-- worker process reads the recent rows a few times a second
-- (Backend.WatchCancels) and stops the handler if it holds the job. AUTO_INCREMENT
-- values can commit out of order, so readers go by time (the last 10
-- seconds) and remember what they saw, not by the highest seq. Rows older
-- than a minute are deleted by the next cancellation.
CREATE TABLE {{db}}.spool_cancels (
  seq    BIGINT NOT NULL AUTO_INCREMENT,
  job_id BIGINT NOT NULL,
  at     DATETIME(6) NOT NULL,
  PRIMARY KEY (seq),
  KEY spool_cancels_at (at)
) ENGINE = InnoDB
