-- Held: the queue of the job ? (id, fence) while that lease holds it,
-- the row locked FOR UPDATE (a wait) or shared (a step's record) by the
-- suffix the caller appends.
SELECT queue FROM {{db}}.spool_jobs WHERE id = ? AND fence = ? AND state = 'running'
