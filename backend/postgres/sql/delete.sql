-- Delete one job unless it is running (a running job is cancelled first,
-- so that its holder learns of it).
DELETE FROM {{s}}.spool_jobs j
WHERE j.id = $1 AND j.state NOT IN ('running', 'waiting') AND NOT j.has_dependents
RETURNING {{jcols}}
