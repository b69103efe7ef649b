-- Issue 15: the operator console's counts of one tenant's tasks by status.
--
-- Kept in step by every write, as task_counts is, so that the console,
-- which asks every few seconds, never counts rows: a grouped count would
-- read every one of the tenant's tasks (status is in no index, so that a
-- retry moves one index entry only; see 001_init). A tenant's row of a
-- status appears with its first task in that status.
CREATE TABLE tenant_counts (
    tenant TEXT    NOT NULL,
    status TEXT    NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (tenant, status)
) WITHOUT ROWID;

-- The tasks stored before this migration, counted once; the migration
-- holds the write lock meanwhile, so no write slips between the count and
-- the first write that keeps it.
INSERT INTO tenant_counts (tenant, status, n) SELECT tenant, status, count(*) FROM tasks GROUP BY tenant, status;
