-- Cancellation events after seq ?1, in order.
SELECT seq, job_id FROM spool_cancels WHERE seq > ?1 ORDER BY seq LIMIT 1000
