-- Whether a queue has a due pending job, by a plain read of the claim
-- index (no lock, no transaction): the probe a small claim sends first
-- when the queue's last claim in this process came back empty. None means
-- a claim now would take none; one (even a row another claim holds, or a
-- paused queue's) sends the claim. Param: the queue.
SELECT EXISTS (SELECT 1 FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
  WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6))
