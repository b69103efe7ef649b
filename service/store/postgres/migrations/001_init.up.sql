-- Times are timestamptz at millisecond precision, NULL for "none";
-- durations are nanoseconds. Text that comes from targets (error messages,
-- response bodies) is bytea: text refuses NUL bytes, and a store keeps what
-- it is given.
--
-- Identifiers are COLLATE "C": they compare byte for byte, so policies list
-- in the same order on every server, and index comparisons are cheap.
--
-- Tables are prefixed retry_ so that the store can share a schema with an
-- application's own tables; a schema of its own is better still (see
-- postgres.WithSchema).

CREATE TABLE retry_policies (
    tenant     text COLLATE "C" NOT NULL,
    id         text COLLATE "C" NOT NULL,
    created_at timestamptz      NOT NULL,
    spec       bytea            NOT NULL,
    PRIMARY KEY (tenant, id)
);

-- What a task is and where lists find it: its identity, its request and its
-- state, which is LIVE while the task is PENDING or IN_FLIGHT and the
-- terminal status afterwards. A claim or a retry never writes this table:
-- only the task's creation, its end, and a redrive do. seq is the creation
-- order and the cursor of lists.
CREATE TABLE retry_tasks (
    seq             bigint           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at      timestamptz      NOT NULL,
    body_binary     boolean          NOT NULL,
    id              text COLLATE "C" NOT NULL,
    tenant          text COLLATE "C" NOT NULL,
    idempotency_key text COLLATE "C" NOT NULL,
    request_hash    text COLLATE "C" NOT NULL,
    policy_id       text COLLATE "C" NOT NULL,
    state           text COLLATE "C" NOT NULL,
    method          text             NOT NULL,
    target_url      text             NOT NULL,
    headers         json             NOT NULL,
    body            bytea            NOT NULL,
    CONSTRAINT retry_tasks_id UNIQUE (id),
    CONSTRAINT retry_tasks_idempotency UNIQUE (tenant, idempotency_key)
);

-- Lists, newest first.
CREATE INDEX retry_tasks_tenant ON retry_tasks (tenant, seq);
CREATE INDEX retry_tasks_tenant_state ON retry_tasks (tenant, state, seq);
CREATE INDEX retry_tasks_tenant_policy ON retry_tasks (tenant, policy_id, seq);
CREATE INDEX retry_tasks_state ON retry_tasks (state, seq);
CREATE INDEX retry_tasks_dead ON retry_tasks (tenant, seq) WHERE state IN ('EXHAUSTED', 'FAILED');

-- The hot rows: one per task, rewritten by every claim and finish. A claim
-- moves a row's wake_at, an indexed column, so PostgreSQL cannot make the
-- update HOT; it writes a new version of the row and one entry in each of
-- this table's indexes. So the table is narrow and has two indexes only
-- (retry_tasks has seven), and fillfactor leaves room for the new version on
-- the row's own page.
--
-- wake_at is when the task must next be looked at: next_attempt_at while
-- PENDING, lease_until while IN_FLIGHT (an expired lease is due at its end),
-- NULL once terminal. One ordered scan of retry_runs_wake then finds due
-- tasks and expired leases together, earliest first, however many tasks
-- are waiting.
CREATE TABLE retry_runs (
    task_seq        bigint           PRIMARY KEY,
    version         bigint           NOT NULL,
    wake_at         timestamptz,
    next_attempt_at timestamptz      NOT NULL,
    budget_start    timestamptz      NOT NULL,
    lease_until     timestamptz,
    claimed_at      timestamptz,
    updated_at      timestamptz      NOT NULL,
    finished_at     timestamptz,
    prev_delay_ns   bigint           NOT NULL,
    attempt_number  integer          NOT NULL,
    last_status     integer          NOT NULL,
    status          text COLLATE "C" NOT NULL,
    last_error      bytea            NOT NULL
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02);

CREATE INDEX retry_runs_wake ON retry_runs (wake_at, task_seq) WHERE wake_at IS NOT NULL;

-- The attempt log, append only; id is the order of a task's entries.
CREATE TABLE retry_attempts (
    task_seq        bigint           NOT NULL,
    id              bigint           GENERATED ALWAYS AS IDENTITY,
    started_at      timestamptz      NOT NULL,
    duration_ns     bigint           NOT NULL,
    attempt_number  integer          NOT NULL,
    response_status integer          NOT NULL,
    error_message   bytea            NOT NULL,
    response_body   bytea            NOT NULL,
    PRIMARY KEY (task_seq, id)
);

-- Tasks by status, for metrics, kept in step by every write so that
-- counting never scans the tasks. The counts are spread over 64 rows, each
-- connection writing the one of its backend's pid, so that concurrent
-- writers do not queue on one row lock; TaskCounts adds them up.
CREATE TABLE retry_counts (
    shard     integer          PRIMARY KEY,
    pending   bigint           NOT NULL DEFAULT 0,
    in_flight bigint           NOT NULL DEFAULT 0,
    succeeded bigint           NOT NULL DEFAULT 0,
    exhausted bigint           NOT NULL DEFAULT 0,
    failed    bigint           NOT NULL DEFAULT 0,
    cancelled bigint           NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

INSERT INTO retry_counts (shard) SELECT generate_series(0, 63);
