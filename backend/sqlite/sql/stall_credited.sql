-- How far write-lock stalls have been credited to running leases.
SELECT credited_until FROM spool_stall WHERE id = 1
