-- Store the rate state of one key. Params: queue, key, time.
INSERT INTO {{db}}.spool_flow_rates (queue, flow_key, tat) VALUES (?, ?, CAST(? AS DATETIME(6)))
ON DUPLICATE KEY UPDATE tat = VALUES(tat)
