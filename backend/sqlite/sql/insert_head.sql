-- Insert: the row tuples and RETURNING are appended (see insert.go).
INSERT INTO spool_jobs (queue, kind, args, priority, run_at, created_at, state, max_attempts, tags, metadata,
  unique_key, unique_states, flow_key) VALUES 
