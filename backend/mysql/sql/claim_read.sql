-- The rows of a one-statement claim (claim_mark.sql), read by primary key
-- after its commit, on the same session: @spool_claimed holds their ids,
-- comma-separated. The database's now comes back with the rows.
SELECT {{cols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs
WHERE id IN (SELECT t.id FROM JSON_TABLE(CONCAT('[', @spool_claimed, ']'), '$[*]' COLUMNS (id BIGINT PATH '$')) t)
