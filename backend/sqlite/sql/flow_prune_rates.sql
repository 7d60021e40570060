-- Rate states whose time passed before ?1 (an hour ago): a past time means
-- the same as no row, so they only take room.
DELETE FROM spool_flow_rates WHERE tat < ?1
