-- Insert: the row tuples are appended (see insert.go).
INSERT INTO {{db}}.spool_jobs
  (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata, created_at, unique_key, unique_states, flow_key) VALUES 
