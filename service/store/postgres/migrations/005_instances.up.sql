-- Issue 19: crash recovery in seconds, not a lease.
--
-- Every retryd instance sharing the schema has a row here while it runs:
-- beat_at, which it moves about every second, and send_to, its send
-- horizon (every attempt it may have sent was due no later; NULL: none
-- yet). Any instance takes back the leases of one whose beat is a few
-- seconds old and deletes its row (store.Instances).
CREATE TABLE retry_instances (
    id         text COLLATE "C" PRIMARY KEY,
    started_at timestamptz      NOT NULL,
    beat_at    timestamptz      NOT NULL,
    send_to    timestamptz
);

-- The instance whose lease an IN_FLIGHT task is (NULL: none known, as for
-- the leases taken before this migration, which run out as they did).
ALTER TABLE retry_runs ADD COLUMN holder text COLLATE "C";

-- An instance's leases, for its beats (which extend those about to end)
-- and for taking them back when it dies.
CREATE INDEX retry_runs_holder ON retry_runs (holder, lease_until) WHERE status = 'IN_FLIGHT' AND holder IS NOT NULL;
