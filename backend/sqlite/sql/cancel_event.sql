-- Records the cancellation of running job ?2 at ?1 for other processes'
-- watchers (migrations/005_cancels.sql).
INSERT INTO spool_cancels (job_id, at) VALUES (?2, ?1)
