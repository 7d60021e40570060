-- Records the cancellation of job ? if it is running, before the cancel
-- statement in the same transaction: the locking read keeps the job from
-- finishing in between.
INSERT INTO {{db}}.spool_cancels (job_id, at)
SELECT id, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs WHERE id = ? AND state = 'running' FOR UPDATE
