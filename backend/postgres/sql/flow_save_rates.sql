-- Store rate states ($2 keys, $3 times) of queue $1.
INSERT INTO {{s}}.spool_flow_rates (queue, flow_key, tat)
SELECT $1, k, t FROM unnest($2::text[], $3::timestamptz[]) AS u(k, t)
ON CONFLICT (queue, flow_key) DO UPDATE SET tat = EXCLUDED.tat
