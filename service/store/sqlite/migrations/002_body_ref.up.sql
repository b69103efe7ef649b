-- Issue 14: bodies by reference, and the retention sweep.
--
-- body_ref is where a body held by reference is ('' for an inline body),
-- body_size its size in bytes (len(body) for an inline one; rows written
-- before this migration hold 0, and readers take len(body) for any inline
-- body). Both have defaults, so existing rows need no rewrite.
ALTER TABLE task_payloads ADD COLUMN body_ref TEXT NOT NULL DEFAULT '';
ALTER TABLE task_payloads ADD COLUMN body_size INTEGER NOT NULL DEFAULT 0;

-- Which references tasks still hold, for the blob sweeps: only the rows
-- that have one.
CREATE INDEX task_payloads_body_ref ON task_payloads (body_ref) WHERE body_ref != '';

-- The retention sweep: terminal tasks by when they ended. A retry names
-- neither state nor finished_at, so it leaves this index alone.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE state != 'LIVE';
