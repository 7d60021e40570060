-- Flow take of jobs without a key: the given ones still pending, in claim
-- order. The id list, then "ORDER BY … LIMIT n FOR UPDATE SKIP LOCKED", are
-- appended.
SELECT {{cols}} FROM {{db}}.spool_jobs
WHERE phase = 1 AND id IN 
