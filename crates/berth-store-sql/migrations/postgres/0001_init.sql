-- berth's schema, version 1 (Postgres). Times are nanoseconds since the Unix epoch, so a
-- record reads back exactly as it was written. Ids, names and paths collate "C" (bytewise),
-- the order Rust's strings sort in, whatever the database's locale.

CREATE TABLE workspaces (
    id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name TEXT COLLATE "C" UNIQUE,
    description TEXT NOT NULL,
    created_ns BIGINT NOT NULL,
    accessed_ns BIGINT NOT NULL,
    agent_id TEXT,
    git_repo TEXT,
    git_branch TEXT,
    git_base TEXT,
    git_branch_created BIGINT,
    git_worktree TEXT,
    -- The workspace's own config overrides, as the text a person wrote.
    config TEXT
);

CREATE TABLE sessions (
    id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    cwd TEXT,
    status TEXT NOT NULL,
    created_ns BIGINT NOT NULL,
    updated_ns BIGINT NOT NULL
);
CREATE INDEX sessions_by_workspace ON sessions (workspace_id, created_ns, id);

-- A transcript is its rows: an append is one insert, whatever the length.
CREATE TABLE messages (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    role TEXT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- Bindings may outlive their workspace, as in the filesystem store: the manager drops a
-- binding whose workspace is gone.
CREATE TABLE bindings (
    device TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    workspace_id TEXT COLLATE "C" NOT NULL
);
CREATE INDEX bindings_by_workspace ON bindings (workspace_id);

-- Storage of both scopes: session_id '' is the workspace's own. Folders are rows too
-- (is_dir = 1, no data), so an empty folder exists until it is removed, as on disk.
CREATE TABLE files (
    workspace_id TEXT COLLATE "C" NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    session_id TEXT COLLATE "C" NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    parent TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    is_dir BIGINT NOT NULL,
    size BIGINT NOT NULL,
    data BYTEA,
    PRIMARY KEY (workspace_id, session_id, path)
);
CREATE INDEX files_by_parent ON files (workspace_id, session_id, parent, name);
