-- Rate states of queue $1 that still hold (a past time means a full bucket).
SELECT flow_key, tat FROM {{s}}.spool_flow_rates WHERE queue = $1 AND tat > now()
