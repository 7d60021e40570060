-- listen_heads_lease.sql and, every listenSlowInterval, the figure of the
-- recent cancellation events, in the same round trip.
SELECT {{listen_heads_cols}},
  {{listen_lease_col}},
  {{listen_slow_col}}
