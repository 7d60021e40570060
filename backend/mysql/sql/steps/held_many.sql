-- Held, for a batch: (id, fence) of the running jobs among the ids the
-- caller appends ("(1,2,…)"), their rows locked shared by the suffix the
-- caller appends, in id order.
SELECT id, fence FROM {{db}}.spool_jobs WHERE state = 'running' AND id IN
