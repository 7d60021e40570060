-- Store the rate state ?3 of flow key ?2 of queue ?1.
INSERT INTO spool_flow_rates (queue, flow_key, tat) VALUES (?1, ?2, ?3)
ON CONFLICT (queue, flow_key) DO UPDATE SET tat = excluded.tat
