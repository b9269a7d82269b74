-- berth's schema, version 6 (SQLite): when a workspace was archived (its worktree removed, its
-- record, sessions and storage kept), in nanoseconds since the epoch; NULL for a workspace in
-- use (every workspace made before).

ALTER TABLE workspaces ADD COLUMN archived_ns INTEGER;
