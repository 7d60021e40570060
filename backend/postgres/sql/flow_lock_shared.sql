-- The flow lock of queue $1 (flow_lock.sql), shared: a striped quick claim
-- (backend.FlowQuick) holds it so, with one stripe of it exclusively
-- (flow_lock_stripe.sql), and so runs beside the other stripes' claims but
-- never beside a claim that holds the whole lock.
SELECT pg_advisory_xact_lock_shared(hashtextextended('spool flow ' || '{{s}}' || ' ' || $1, 0))
