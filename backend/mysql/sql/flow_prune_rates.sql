-- Rate states whose time passed an hour ago (and idle queues' flow lock
-- rows): a past time means the same as no row, so they only take room.
DELETE FROM {{db}}.spool_flow_rates WHERE tat < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR
