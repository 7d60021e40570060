-- Move the credited mark to ?1.
UPDATE spool_stall SET credited_until = ?1 WHERE id = 1
