-- The lease rows holding any of a batch's ids ($1), as a condition on the
-- lease rows l: the GiST index on the spans of their ids (schema 15) finds
-- the candidates with one entry per lease row, then each candidate's ids
-- are checked against a hash of the batch's (PostgreSQL hashes = ANY of a
-- constant array of 9 or more), so a row whose span only overlaps the
-- batch's is neither locked nor read further. A span lookup does not grow
-- with the batch, so a batch of any size uses it. Why not a GIN index of
-- the ids or a hash of every lease row: BENCHMARKS.md, "Finding lease
-- rows by span".
l.span && (SELECT int8range(min(x), max(x), '[]') FROM unnest($1::bigint[]) AS x)
    AND EXISTS (SELECT FROM unnest(l.ids) AS k(id) WHERE k.id = ANY ($1::bigint[]))
