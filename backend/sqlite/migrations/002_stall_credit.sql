-- Stall credit: while one connection holds the write lock nobody else can
-- write the file, heartbeats included. The time such a stall lasted is added
-- to every running lease once (see stall.go); credited_until is the instant
-- up to which stalls have been credited, so two processes that waited
-- through the same stall do not both add it. Microseconds, like every time.

CREATE TABLE spool_stall (
  id             INTEGER PRIMARY KEY CHECK (id = 1),
  credited_until INTEGER NOT NULL
) STRICT;

INSERT INTO spool_stall (id, credited_until) VALUES (1, 0);
