-- The looker's lease of the listener's set of queues (schema 18; the
-- set's key is bound): the highest job id its holder read, whether the
-- holder has no idle worker, whether the lease is live by the server's
-- clock, whether its holder gave it up, and the holder; NULL when the row
-- is missing. Included as {{listen_lease_col}}.
(SELECT concat_ws(' ', cursor_id, slow, until > UTC_TIMESTAMP(6), until < '1000-01-02', holder) FROM {{db}}.spool_looker WHERE set_key = ?)
