-- Times are epoch milliseconds, durations nanoseconds, zero for "none".

CREATE TABLE policies (
    tenant     TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    spec       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;

-- The hot row: what claims and finishes rewrite. seq (the rowid) is the
-- creation order and the list cursor; the request itself lives in
-- task_payloads so that rewriting a task never copies its body.
--
-- A retry cycle (PENDING → IN_FLIGHT → PENDING) must touch as few index
-- entries as it can, so status is in no index. Indexes use state instead,
-- which is LIVE for PENDING and IN_FLIGHT and the status itself once
-- terminal, and wake_at: when the scheduler must next look at a live task,
-- its next attempt when PENDING and its lease's end when IN_FLIGHT. A claim
-- or a retry then moves one entry of tasks_wake and nothing else.
CREATE TABLE tasks (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL,
    tenant          TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    request_hash    TEXT    NOT NULL,
    policy_id       TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    wake_at         INTEGER NOT NULL,
    attempt_number  INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    prev_delay_ns   INTEGER NOT NULL,
    budget_start    INTEGER NOT NULL,
    last_error      TEXT    NOT NULL,
    last_status     INTEGER NOT NULL,
    lease_until     INTEGER NOT NULL,
    claimed_at      INTEGER NOT NULL,
    version         INTEGER NOT NULL,
    log_count       INTEGER NOT NULL, -- attempt log entries so far: the key of the next
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER NOT NULL
);

CREATE UNIQUE INDEX tasks_id ON tasks (id);
CREATE UNIQUE INDEX tasks_idempotency ON tasks (tenant, idempotency_key);
-- Claims: due tasks and expired leases, in one small partial index.
CREATE INDEX tasks_wake ON tasks (wake_at) WHERE state = 'LIVE';
-- Lists, newest first (the rowid ends every index).
CREATE INDEX tasks_tenant ON tasks (tenant);
CREATE INDEX tasks_tenant_state ON tasks (tenant, state);
CREATE INDEX tasks_tenant_policy ON tasks (tenant, policy_id);
CREATE INDEX tasks_state ON tasks (state);
CREATE INDEX tasks_dead ON tasks (tenant) WHERE state IN ('EXHAUSTED', 'FAILED');

CREATE TABLE task_payloads (
    task_seq    INTEGER PRIMARY KEY,
    target_url  TEXT    NOT NULL,
    method      TEXT    NOT NULL,
    headers     TEXT    NOT NULL, -- a JSON object
    body        BLOB    NOT NULL,
    body_binary INTEGER NOT NULL
);

CREATE TABLE attempts (
    task_seq        INTEGER NOT NULL,
    n               INTEGER NOT NULL, -- position in the task's log
    attempt_number  INTEGER NOT NULL,
    started_at      INTEGER NOT NULL,
    duration_ns     INTEGER NOT NULL,
    response_status INTEGER NOT NULL,
    error_message   TEXT    NOT NULL,
    response_body   TEXT    NOT NULL,
    PRIMARY KEY (task_seq, n)
) WITHOUT ROWID;

-- Kept in step with tasks by every write, so that metrics never count rows.
CREATE TABLE task_counts (
    status TEXT    PRIMARY KEY,
    n      INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO task_counts (status, n) VALUES
    ('PENDING', 0), ('IN_FLIGHT', 0), ('SUCCEEDED', 0),
    ('EXHAUSTED', 0), ('FAILED', 0), ('CANCELLED', 0);
