-- Wait of the job ?: the signal its last wait was for.
SELECT coalesce(wait_signal, '') FROM {{db}}.spool_jobs WHERE id = ?
