-- The flow lock of queue ? (flow_lock.sql), shared: a striped quick claim
-- (backend.FlowQuick) holds it so, with one stripe row exclusively
-- (flow_lock_stripe.sql), and so runs beside the other stripes' claims but
-- never beside a claim that holds the whole lock. No row (cleanup removed an
-- idle queue's) locks nothing: the claim then takes the whole lock.
SELECT 1 FROM {{db}}.spool_flow_rates WHERE queue = ? AND flow_key = '' LOCK IN SHARE MODE
