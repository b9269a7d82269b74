-- berth's schema, version 3 (Postgres): the tokens each session's turns used, added up. Every
-- session made before used none that berth counted.

ALTER TABLE sessions ADD COLUMN input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0;
