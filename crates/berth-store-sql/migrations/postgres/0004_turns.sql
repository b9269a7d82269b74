-- berth's schema, version 4 (Postgres): who holds a session's turn (a random id of the process
-- that holds it) and until when (ns); the holder renews the lease while the turn runs, so a
-- server that dies gives the turn back when its lease runs out.

ALTER TABLE sessions ADD COLUMN turn_owner TEXT;
ALTER TABLE sessions ADD COLUMN turn_until BIGINT;
