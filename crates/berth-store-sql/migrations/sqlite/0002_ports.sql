-- berth's schema, version 2 (SQLite): each workspace's block of TCP ports, port_first to
-- port_first + port_count - 1. NULL for a workspace without one (every workspace made before).
-- Creates that take a block hold the write lock while they choose it; the unique index is the
-- database's own guarantee that no two workspaces start their blocks on one port.

ALTER TABLE workspaces ADD COLUMN port_first INTEGER;
ALTER TABLE workspaces ADD COLUMN port_count INTEGER;
CREATE UNIQUE INDEX workspaces_port_first ON workspaces (port_first);
