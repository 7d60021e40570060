-- Placeholder (h-steps): keeps the versions contiguous until the lead
-- renumbers the branches' migrations at merge; drop it then.
SELECT 1
