-- Rate states of queue ?1 that still hold at ?2.
SELECT flow_key, tat FROM spool_flow_rates WHERE queue = ?1 AND tat > ?2
