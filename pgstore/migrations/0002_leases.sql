-- Version 2: leases on runs and workflows, for hosts that share the
-- database. A lease changes holder only when it has expired (by the
-- server's clock) or the new holder takes it over; each change of holder
-- increments token, and every fenced commit checks holder and token in its
-- own transaction.
CREATE TABLE leases (
	key        text PRIMARY KEY,
	holder     text NOT NULL,
	token      bigint NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX leases_holder ON leases (holder);
