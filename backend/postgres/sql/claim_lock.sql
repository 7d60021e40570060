-- The claim lock of queue $1: claims of one queue, from every process,
-- take their rows one at a time. Sent in the claim's transaction before
-- the claim statement, so that statement's snapshot is taken once the
-- claim before it has committed: it sees those rows gone instead of
-- stepping over rows that another claim holds (SKIP LOCKED tries each
-- one's lock) or that it has just taken. Held to the commit.
SELECT pg_advisory_xact_lock(hashtextextended('spool claim ' || '{{s}}' || ' ' || $1, 0))
