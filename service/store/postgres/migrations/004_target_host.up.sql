-- Issue 15: lists of one tenant's tasks by their target's host.
--
-- target_host is the host of the task's target URL as url.URL.Host gives
-- it (name, and :port when the URL writes one), in lower case, so that a
-- filter ignores case (package targethost); TaskCreate writes it. It is a
-- column of its own, rather than an expression over target_url, so that
-- what a list matches is Go's url.URL.Host exactly for every new task.
ALTER TABLE retry_tasks ADD COLUMN target_host text COLLATE "C" NOT NULL DEFAULT '';

-- The tasks stored before this migration: the host cut out of the URL by a
-- regular expression that does what url.URL.Host does for the URLs the API
-- accepts (http or https, with a host): after "scheme://", up to the first
-- '/', '?' or '#', less any user information (up to the last '@', which
-- the greedy group takes). This rewrites every row of retry_tasks once
-- (not retry_runs, which claims and finishes write).
UPDATE retry_tasks SET target_host = lower(substring(target_url FROM '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#]*@)?([^/?#]*)'))
WHERE target_url ~ '^[A-Za-z][A-Za-z0-9+.-]*://';

-- Host lists, newest first.
CREATE INDEX retry_tasks_tenant_host ON retry_tasks (tenant, target_host, seq);
