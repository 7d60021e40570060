-- A sweep for jobs whose dependents a write outside JobFinishMany left
-- unsettled (a cancel that lost its connection after its commit).
SELECT id FROM {{s}}.spool_jobs WHERE has_dependents AND state IN ('completed', 'discarded', 'cancelled') LIMIT 1000
