-- berth's schema, version 5 (SQLite): kept runs, so that every berth process on the file sees
-- every run and a queued run is taken by whichever worker is free. See the Postgres migration
-- of the same version for what each column is.

CREATE TABLE runs (
    id TEXT NOT NULL PRIMARY KEY,
    created_ns INTEGER NOT NULL,
    state TEXT NOT NULL,
    pooled INTEGER NOT NULL,
    node TEXT,
    agents INTEGER NOT NULL,
    record TEXT NOT NULL,
    owner TEXT,
    lease_until INTEGER,
    fence INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_age ON runs (created_ns);
CREATE INDEX runs_waiting ON runs (pooled, state, created_ns);

CREATE TABLE run_events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE run_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    agent INTEGER,
    body TEXT NOT NULL
);

CREATE TABLE run_sessions (
    session_id TEXT NOT NULL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE
);
