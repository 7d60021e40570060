-- Signal sent: whether the job ? has a signal named ?.
SELECT EXISTS (SELECT 1 FROM {{db}}.spool_signals WHERE job_id = ? AND name = ?)
