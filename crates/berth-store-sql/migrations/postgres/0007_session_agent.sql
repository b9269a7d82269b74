-- berth's schema, version 7 (Postgres): the ACP agent that works in a session, as a run names
-- it (`claude-code`, a command line); NULL for berth's own agent (every session made before).

ALTER TABLE sessions ADD COLUMN agent TEXT;
