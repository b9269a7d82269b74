-- berth's schema, version 8 (SQLite): kept lands (`berth land`, the merge queue). See the
-- Postgres migration of the same version for what each column is.

CREATE TABLE lands (
    id TEXT NOT NULL PRIMARY KEY,
    created_ns INTEGER NOT NULL,
    version INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX lands_by_age ON lands (created_ns);
