-- Signal lock: the lock a wait and a signal on the job $1 take turns on.
SELECT {{s}}.spool_signal_lock($1)
