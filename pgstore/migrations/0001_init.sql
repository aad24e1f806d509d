-- Version 1 of the pgstore schema. Encoded values are CBOR (bytea), as the
-- file store writes them, so messages come back byte for byte.

-- sessions holds one row per session: its current generation (the
-- compare-and-swap is an UPDATE ... WHERE generation = the expected one) and
-- its head: the state without messages, traces and artifact bytes.
CREATE TABLE sessions (
	id            text PRIMARY KEY,
	generation    bigint NOT NULL,
	head          bytea NOT NULL,
	message_count bigint NOT NULL,
	trace_count   bigint NOT NULL,
	updated_at    timestamptz NOT NULL
);

-- commits is append-only: one row per generation, the changes it applied
-- (artifact bytes left out: they are in blobs). Load replays it.
CREATE TABLE commits (
	session_id   text NOT NULL,
	generation   bigint NOT NULL,
	token        bytea NOT NULL,
	committed_at timestamptz NOT NULL,
	changes      bytea NOT NULL,
	PRIMARY KEY (session_id, generation)
);

CREATE TABLE messages (
	session_id text NOT NULL,
	idx        bigint NOT NULL,
	generation bigint NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (session_id, idx)
);
CREATE INDEX messages_generation ON messages (session_id, generation);

CREATE TABLE traces (
	session_id text NOT NULL,
	idx        bigint NOT NULL,
	generation bigint NOT NULL,
	run_id     text NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (session_id, idx)
);
CREATE INDEX traces_run ON traces (session_id, run_id, idx);
CREATE INDEX traces_generation ON traces (session_id, generation);

-- blobs holds artifact bytes by content, in chunks of at most 1 MiB.
CREATE TABLE blobs (
	sha256 text NOT NULL,
	n      integer NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (sha256, n)
);

-- checkpoints is each session's latest loop checkpoint per run;
-- run_checkpoints every kept checkpoint of a run, for RunEvents.
CREATE TABLE checkpoints (
	session_id text NOT NULL,
	run_id     text NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (session_id, run_id)
);
CREATE INDEX checkpoints_run ON checkpoints (run_id);

CREATE TABLE run_checkpoints (
	session_id text NOT NULL,
	run_id     text NOT NULL,
	generation bigint NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (session_id, run_id, generation)
);

CREATE TABLE runs (
	session_id text NOT NULL,
	run_id     text NOT NULL,
	PRIMARY KEY (session_id, run_id)
);
CREATE INDEX runs_run ON runs (run_id);

CREATE TABLE workflows (
	id         text PRIMARY KEY,
	session_id text NOT NULL,
	data       bytea NOT NULL
);
CREATE INDEX workflows_session ON workflows (session_id, id);
