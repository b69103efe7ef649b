-- A tenant's destinations: its named targets, which tasks name and the
-- scheduler reads (through a cache) at each attempt. spec is the
-- destination's JSON with its secrets sealed, which the store keeps and
-- never reads; request_hash tells a repeated create from a conflicting
-- one; version is bumped by every change, and a change or a delete names
-- the version it was made from (the UPDATE or DELETE checks it in its
-- WHERE, so two writers cannot both pass).
--
-- A tenant has a few tens of destinations, so the primary key is the only
-- index: reads by ID and lists by ID both walk it.
CREATE TABLE retry_destinations (
    tenant       text COLLATE "C" NOT NULL,
    id           text COLLATE "C" NOT NULL,
    version      bigint           NOT NULL,
    created_at   timestamptz      NOT NULL,
    updated_at   timestamptz      NOT NULL,
    request_hash text             NOT NULL,
    spec         bytea            NOT NULL,
    PRIMARY KEY (tenant, id)
);
