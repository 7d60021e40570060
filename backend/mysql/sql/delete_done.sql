-- Complete by deleting (completed jobs not kept): as complete.sql. The
-- id list is appended.
DELETE FROM {{db}}.spool_jobs WHERE state = 'running' AND id IN 
