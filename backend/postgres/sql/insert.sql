-- Insert any number of rows in one statement; ids come back in input
-- order because nextval runs in ORDER BY ord order.
{{insert_rows}}
) t
ORDER BY t.ord
RETURNING id, false, run_at, state = 'available' -- never a duplicate: the second column of insert_unique.sql; the last two tell a wake-up after commit what to announce
