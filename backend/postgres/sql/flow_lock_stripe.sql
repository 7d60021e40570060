-- Stripe $2 of the flow lock of queue $1, taken after the shared lock
-- (flow_lock_shared.sql), held to the end of the transaction.
SELECT pg_advisory_xact_lock(hashtextextended('spool flow stripe ' || '{{s}}' || ' ' || $1 || ' ' || $2::int, 0))
