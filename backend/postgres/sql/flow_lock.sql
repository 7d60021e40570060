-- Flow lock: held to the end of the flow claim's transaction, so flow
-- claims of one queue (in any process) run one at a time and decide on
-- what the previous one committed.
SELECT pg_advisory_xact_lock(hashtextextended('spool flow ' || '{{s}}' || ' ' || $1, 0))
