-- berth's schema, version 5 (Postgres): kept runs, so that every node on one database sees
-- every run and a queued run is taken by whichever worker is free.
--
-- A run's record is berth-run's JSON (the request, each agent's node, workspace, session and
-- state); the columns beside it are what a query picks runs by. Whoever works a run holds a
-- lease (`owner` until `lease_until`, ns), renewed while it works, and every write it makes
-- names the `fence` it was given when it took the run: a node whose lease ran out and was
-- taken over writes nothing more.

CREATE TABLE runs (
    id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    created_ns BIGINT NOT NULL,
    state TEXT NOT NULL,
    -- A queued run: taken by a worker (`serve --worker`), and taken over when its lease lapses.
    pooled BIGINT NOT NULL,
    -- The node a pooled run is pinned to (`--node`); NULL: any.
    node TEXT,
    agents BIGINT NOT NULL,
    record TEXT NOT NULL,
    owner TEXT,
    lease_until BIGINT,
    fence BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_age ON runs (created_ns);
CREATE INDEX runs_waiting ON runs (pooled, state, created_ns);

CREATE TABLE run_events (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Stops and tells for a run's supervisor, taken in the order they came.
CREATE TABLE run_requests (
    id BIGSERIAL PRIMARY KEY,
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    agent BIGINT,
    body TEXT NOT NULL
);

-- Which run a session works for (what MCP's session_status asks).
CREATE TABLE run_sessions (
    session_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE
);
