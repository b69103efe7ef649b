-- Issue 14: bodies by reference, and the retention sweep.
--
-- body_ref is where a body held by reference is ('' for an inline body),
-- body_size its size in bytes (octet_length(body) for an inline one; rows
-- written before this migration hold 0, and readers take the body's length
-- for any inline body). Columns with a constant default are added without
-- rewriting the table.
ALTER TABLE retry_tasks ADD COLUMN body_ref text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE retry_tasks ADD COLUMN body_size bigint NOT NULL DEFAULT 0;

-- Which references tasks still hold, for the blob sweeps: only the rows
-- that have one. (Building it reads the table once, under a lock that
-- holds writes back meanwhile.)
CREATE INDEX retry_tasks_body_ref ON retry_tasks (body_ref) WHERE body_ref <> '';

-- The retention sweep: terminal tasks by when they ended. Live rows, which
-- claims and retries rewrite, have no entry.
CREATE INDEX retry_runs_finished ON retry_runs (finished_at, task_seq) WHERE finished_at IS NOT NULL;
