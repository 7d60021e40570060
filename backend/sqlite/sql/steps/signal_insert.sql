-- Signal: keep the signal (?2 name, ?3 payload) of the job ?1 at ?4
-- (now), unless one of that name was sent before: the first one wins.
INSERT INTO spool_signals (job_id, name, payload, created_at)
SELECT ?1, ?2, ?3, ?4 FROM spool_jobs WHERE id = ?1
ON CONFLICT (job_id, name) DO NOTHING
