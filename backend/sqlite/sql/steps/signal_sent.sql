-- Signal sent: whether the job ?1 has a signal named ?2.
SELECT EXISTS (SELECT 1 FROM spool_signals WHERE job_id = ?1 AND name = ?2)
