-- Version 3: events between hosts. NOTIFY carries only a row id here (its
-- payload is limited to 8000 bytes); listeners read the events themselves,
-- each once, as the rows whose transaction committed since the snapshot of
-- their previous read (xid against pg_snapshot), so an event of any size,
-- and one sent while a listener was disconnected, is not lost. Rows older
-- than the retention are pruned by the listeners.
CREATE TABLE events (
	id      bigserial PRIMARY KEY,
	xid     xid8 NOT NULL DEFAULT pg_current_xact_id(),
	at      timestamptz NOT NULL DEFAULT now(),
	payload text NOT NULL
);
CREATE INDEX events_xid ON events (xid);
