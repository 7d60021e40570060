-- The newest cancellation event's seq (0 for none).
SELECT coalesce(max(seq), 0) FROM spool_cancels
