-- insert_tasks.sql without ON CONFLICT DO NOTHING, for calls in which no
-- row has a unique key: a row that holds none can meet no conflict but on
-- its id, which an error reports as well as a row left out would
-- (insertTasks), and the speculative insertion the clause asks for costs
-- each row a WAL record (HEAP_CONFIRM) and the insert about a third of
-- its server time (BENCHMARKS.md, "A DAG task's completion against a
-- plain job's").
{{task_rows}}
RETURNING id
