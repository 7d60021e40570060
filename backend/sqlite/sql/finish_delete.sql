-- Finish, deleting (DeleteCompleted): the completed jobs of the batch whose
-- lease holds. ?2 is the JSON array of [id, fence, outcome, delay_us, error]
-- rows that finish_input reads.
DELETE FROM spool_jobs WHERE id IN (
  SELECT j.id FROM {{finish_input}} AS i JOIN spool_jobs AS j ON j.id = i.fid
  WHERE i.outcome = 1 AND j.fence = i.ffence AND j.state = 'running' AND NOT j.has_dependents
)
RETURNING id, fence
