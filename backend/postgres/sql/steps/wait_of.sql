-- Wait of the job $1: the signal its last wait was for.
SELECT coalesce(wait_signal, '') FROM {{s}}.spool_jobs WHERE id = $1
