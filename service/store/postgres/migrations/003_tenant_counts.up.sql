-- Issue 15: the operator console's counts of one tenant's tasks by status.
--
-- Kept in step by every write, as retry_counts is, so that the console,
-- which asks every few seconds, never counts rows. Each tenant's counts are
-- spread over up to 64 rows in the same way (the shard of the writing
-- connection's backend pid), so that concurrent writers of one busy tenant
-- do not queue on one row lock; a row appears with the first write of its
-- shard for the tenant, and TenantCounts adds up the tenant's rows. No
-- column of the key changes, so every update is HOT.
CREATE TABLE retry_tenant_counts (
    tenant    text COLLATE "C" NOT NULL,
    shard     integer          NOT NULL,
    pending   bigint           NOT NULL DEFAULT 0,
    in_flight bigint           NOT NULL DEFAULT 0,
    succeeded bigint           NOT NULL DEFAULT 0,
    exhausted bigint           NOT NULL DEFAULT 0,
    failed    bigint           NOT NULL DEFAULT 0,
    cancelled bigint           NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, shard)
) WITH (fillfactor = 50);

-- The tasks stored before this migration, counted once. Writes made
-- meanwhile by instances of an older retryd, which do not keep these
-- counts, are not in them: upgrade every instance before relying on
-- TenantCounts.
INSERT INTO retry_tenant_counts (tenant, shard, pending, in_flight, succeeded, exhausted, failed, cancelled)
SELECT t.tenant, 0,
    count(*) FILTER (WHERE r.status = 'PENDING'), count(*) FILTER (WHERE r.status = 'IN_FLIGHT'),
    count(*) FILTER (WHERE r.status = 'SUCCEEDED'), count(*) FILTER (WHERE r.status = 'EXHAUSTED'),
    count(*) FILTER (WHERE r.status = 'FAILED'), count(*) FILTER (WHERE r.status = 'CANCELLED')
FROM retry_tasks t JOIN retry_runs r ON r.task_seq = t.seq
GROUP BY t.tenant;
