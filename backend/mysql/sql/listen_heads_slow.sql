-- listen_heads.sql and, every listenSlowInterval, the figure of the
-- recent cancellation events, in the same round trip.
SELECT {{listen_heads_cols}},
  {{listen_slow_col}}
