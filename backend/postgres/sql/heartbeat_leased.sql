-- Heartbeat, leased part (schema 12): extend by $3 microseconds, never
-- moving one back (a client's beats may land out of order), the lease
-- rows holding any of the jobs ($1 ids, $2 fences), and return the jobs
-- found in them; the rest go to heartbeat.sql after it. A lease row's
-- jobs share one lease, so a beat for one extends its siblings too: they
-- have one holder, whose heartbeat covers them all.
WITH
-- input, locked and hits: the jobs of $1 under their fences $2 in the
-- lease rows holding them, locked (fragments/leased_hits.sql).
{{leased_hits}},
extended AS (
  UPDATE {{s}}.spool_leases l SET leased_until = greatest(l.leased_until, now() + $3::bigint * interval '1 microsecond')
  WHERE l.id IN (SELECT lease FROM hits)
)
SELECT id, fence FROM hits
