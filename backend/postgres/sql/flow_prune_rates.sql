-- Rate states whose time passed an hour ago: a past time means the same as
-- no row, so they only take room (one row per key ever rate-limited).
DELETE FROM {{s}}.spool_flow_rates WHERE tat < now() - interval '1 hour'
