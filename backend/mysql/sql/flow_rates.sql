-- Rate states of queue ?; the keys' quoted list is appended.
SELECT flow_key, tat FROM {{db}}.spool_flow_rates WHERE queue = ? AND flow_key IN 
