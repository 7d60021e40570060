-- listen_heads.sql and the looker's lease of the listener's set of
-- queues: read instead by every listener that does not hold the lease.
SELECT {{listen_heads_cols}},
  {{listen_lease_col}}
