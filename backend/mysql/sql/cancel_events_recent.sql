-- Cancellation events of the last 10 seconds (the window covers a
-- transaction that committed its event late).
SELECT seq, job_id FROM {{db}}.spool_cancels WHERE at >= UTC_TIMESTAMP(6) - INTERVAL 10 SECOND
