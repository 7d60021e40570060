-- The rate state of flow key ?2 of queue ?1.
SELECT tat FROM spool_flow_rates WHERE queue = ?1 AND flow_key = ?2
