-- Version 4: collection of expired leases and unused artifact bytes.

-- Lease tokens come from one sequence, so a key's token keeps rising even
-- when its row is collected and created again: a holder fenced with a
-- token from before can never match the new row.
CREATE SEQUENCE lease_tokens;
SELECT setval('lease_tokens', (SELECT coalesce(max(token), 0) + 1 FROM leases), false);
CREATE INDEX leases_expires ON leases (expires_at);

-- blob_refs records which sessions' commits name which artifact bytes.
-- Every commit that names an artifact adds its rows; Delete removes the
-- session's. Bytes no row refers to are unused. Bytes written before this
-- version are pinned (session_id ''), since their commits' references are
-- inside encoded rows.
CREATE TABLE blob_refs (
	sha256     text NOT NULL,
	session_id text NOT NULL,
	PRIMARY KEY (sha256, session_id)
);
CREATE INDEX blob_refs_session ON blob_refs (session_id);
INSERT INTO blob_refs (sha256, session_id) SELECT DISTINCT sha256, '' FROM blobs;

-- data_bytes is the bytes of a session's message and trace rows, for the
-- limit on a session's live bytes (Options.MaxSessionBytes).
ALTER TABLE sessions ADD COLUMN data_bytes bigint NOT NULL DEFAULT 0;
UPDATE sessions s SET data_bytes =
	coalesce((SELECT sum(length(data)) FROM messages m WHERE m.session_id = s.id), 0) +
	coalesce((SELECT sum(length(data)) FROM traces t WHERE t.session_id = s.id), 0);
