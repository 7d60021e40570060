-- The rows of a one-statement claim (claim_mark.sql), read by primary key
-- after its commit, on the same session: @spool_claimed holds their ids,
-- comma-separated. STRAIGHT_JOIN and the index hint keep the plan to one
-- primary key lookup an id: on a table its statistics call small the
-- optimizer would scan spool_jobs and probe the ids. The database's now
-- comes back with the rows.
SELECT {{cols}}, UTC_TIMESTAMP(6)
FROM JSON_TABLE(CONCAT('[', @spool_claimed, ']'), '$[*]' COLUMNS (claimed BIGINT PATH '$')) t
STRAIGHT_JOIN {{db}}.spool_jobs FORCE INDEX (PRIMARY) ON spool_jobs.id = t.claimed
