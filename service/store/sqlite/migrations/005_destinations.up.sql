-- A tenant's destinations: its named targets, which tasks name and the
-- scheduler reads (through a cache) at each attempt. spec is the
-- destination's JSON with its secrets sealed, which the store keeps and
-- never reads; request_hash tells a repeated create from a conflicting
-- one; version is bumped by every change, and a change or a delete names
-- the version it was made from. Times are epoch milliseconds.
--
-- A tenant has a few tens of destinations, so the primary key is the only
-- index: reads by ID and lists by ID both walk it.
CREATE TABLE destinations (
    tenant       TEXT    NOT NULL,
    id           TEXT    NOT NULL,
    spec         BLOB    NOT NULL,
    request_hash TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
