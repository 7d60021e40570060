-- The column list scanBatch reads (workflow.go).
id, name, created_at, sealed, total, completed, discarded, cancelled, finished_at,
  coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)
