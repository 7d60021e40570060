-- Job lock: the queue of the job ?, its row locked, so that a signal and
-- a wait on one job take turns.
SELECT queue FROM {{db}}.spool_jobs WHERE id = ? FOR UPDATE
