-- Rate states of queue ? that still hold.
SELECT flow_key, tat FROM {{db}}.spool_flow_rates WHERE queue = ? AND tat > UTC_TIMESTAMP(6)
