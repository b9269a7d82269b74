-- berth's schema, version 8 (Postgres): kept lands (`berth land`, the merge queue), so that a
-- land cut off by a crash or Ctrl-C is resumed, and `land list` / `show` see it from any node.

CREATE TABLE lands (
    -- 12 hex digits, made by berth.
    id TEXT NOT NULL PRIMARY KEY,
    -- When it was made, in nanoseconds since the epoch: `land list` is newest first.
    created_ns BIGINT NOT NULL,
    -- One more on every write: a write names the version it read, so two writers never
    -- overwrite each other unseen.
    version BIGINT NOT NULL,
    -- berth-run's record of the land (JSON, which this crate does not read).
    record TEXT NOT NULL
);
CREATE INDEX lands_by_age ON lands (created_ns);
