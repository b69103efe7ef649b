-- Issue 15: lists of one tenant's tasks by their target's host.
--
-- target_host is the host of the task's target URL as url.URL.Host gives
-- it (name, and :port when the URL writes one), in lower case, so that a
-- filter ignores case (package targethost); TaskCreate writes it. It is on
-- tasks rather than task_payloads so that one index holds it with the
-- tenant, newest first, as the other lists' indexes do; no claim or finish
-- names it, so they leave the index alone.
ALTER TABLE tasks ADD COLUMN target_host TEXT NOT NULL DEFAULT '';

-- The tasks stored before this migration: the host cut out of the URL in
-- SQL, as url.URL.Host does for the URLs the API accepts (http or https,
-- with a host): after "scheme://", up to the first '/', '?' or '#', less
-- any user information (up to the last '@'; rtrim with every character of
-- the authority but '@' strips back to it). A URL without "://" after a
-- scheme has no host. This writes every row of tasks once, in the
-- migration's transaction.
UPDATE tasks SET target_host = h.host FROM (
    SELECT task_seq, lower(substr(a, length(rtrim(a, replace(a, '@', ''))) + 1)) AS host FROM (
        SELECT task_seq, substr(r, 1, min(
            coalesce(nullif(instr(r, '/'), 0), length(r) + 1),
            coalesce(nullif(instr(r, '?'), 0), length(r) + 1),
            coalesce(nullif(instr(r, '#'), 0), length(r) + 1)) - 1) AS a FROM (
            SELECT task_seq, substr(target_url, instr(target_url, '://') + 3) AS r FROM task_payloads
            WHERE instr(target_url, '://') > 1
                AND substr(target_url, 1, 1) GLOB '[A-Za-z]'
                AND substr(target_url, 1, instr(target_url, '://') - 1) NOT GLOB '*[^A-Za-z0-9+.-]*'
        )
    )
) AS h WHERE tasks.seq = h.task_seq;

-- Host lists, newest first (the rowid ends the index).
CREATE INDEX tasks_tenant_host ON tasks (tenant, target_host);
