-- The SET list of settle_children.sql's two updates, over the dependent c
-- and its edges' counts e (n parents settled, fail: one of them cancels
-- it): lowered deps_left, and at zero available (or scheduled, due from
-- now at the latest, above every claim floor), or cancelled.
deps_left = c.deps_left - e.n,
  state = (CASE WHEN e.fail THEN 'cancelled' WHEN c.deps_left - e.n > 0 THEN 'waiting'
    WHEN c.run_at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state,
  run_at = CASE WHEN NOT e.fail AND c.deps_left - e.n <= 0 THEN greatest(c.run_at, now()) ELSE c.run_at END,
  wait_kind = CASE WHEN e.fail OR c.deps_left - e.n <= 0 THEN NULL ELSE c.wait_kind END,
  finalized_at = CASE WHEN e.fail THEN now() END,
  errors = CASE WHEN e.fail THEN coalesce(c.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', c.attempt, 'at', now(), 'error', 'cancelled: a dependency ended discarded or cancelled'))
    ELSE c.errors END
