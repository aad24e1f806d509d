// Package pgstore is a session.Store on PostgreSQL, so hosts that share one
// database share their sessions, loop checkpoints and workflow checkpoints.
// It needs PostgreSQL 13 or later (the event listener reads by pg_snapshot
// and xid8); it is tested on 15.
//
// Every commit is one transaction, sent as one pipelined batch after
// reading the session's row FOR UPDATE, or as a single batch when the
// store committed the session last and its cached row still holds (see
// headCache). It appends a row to commits (the
// generation's changes, replayed by Load) and updates the session's row with
// UPDATE ... WHERE generation = <the generation it read>, under a row lock,
// so the compare-and-swap of CommitOptions.ExpectGeneration holds across
// processes and hosts. The same transaction keeps the tables the targeted
// reads use: the session's head (its state without messages, traces and
// artifact bytes), its messages and traces one row each, indexed by
// position and generation, its latest loop checkpoint per run, and artifact
// bytes by content in chunks of at most ChunkSize, so no row is unbounded.
// Head, a message tail, a checkpoint and one artifact each cost an indexed
// lookup, not the session's size; ArtifactsByID reads the session's row
// and the named artifacts' chunks in one snapshot.
//
// The schema is created and migrated on Open from the embedded migrations,
// and versioned in schema_version; a database whose schema is newer than this
// build knows is refused with schema_unsupported, and nothing is changed.
//
// When the server cannot be reached, a call fails with the code unavailable
// within its context's deadline, and the same Store works again once the
// server is back. A commit whose connection dies after COMMIT was sent is
// resolved by reading its generation back (each commit row carries a random
// token); when that read cannot be made either, the commit fails with
// unavailable and may or may not have landed: a caller that needs to know
// reads the session's generation.
//
// Store is a session.Leaser: leases on runs and workflows live in the
// leases table and expire by the server's clock, and each change of holder
// raises the lease's fencing token. A commit or step fenced by
// CommitOptions.Fence checks holder and token with an UPDATE that also
// renews the lease, first thing in its own transaction, and writes nothing
// (not_owner) when they no longer match.
//
// Collect (run by Open, then every Options.CollectEvery) removes lease
// rows expired for longer than a grace and the artifact bytes no session
// refers to (blob_refs), in bounded passes that are safe with other hosts
// committing and collecting at once.
//
// Store is a session.Checker: Verify checks each session in its own
// read-only snapshot (commit generations contiguous up to the session's,
// message and trace positions against the head's counts, the byte
// accounting of the session limit, every artifact's chunks against its size
// and SHA-256, and their blob_refs), and workflow rows, and changes
// nothing. Repair is refused with invalid_argument: it is the file store's
// salvage of a log, and PostgreSQL's own tools cover damage there.
//
// A commit that ends a run (UpsertRuns with a status other than running:
// completed, failed, or interrupted when a resume supersedes it) deletes
// that run's lease in its own transaction, since nothing writes it again.
//
// Store is a session.Notifier too: a commit with CommitOptions.Notify
// writes its events as a row of the events table inside its own
// transaction, and wakes listeners with pg_notify on Channel once it has
// committed (coalesced, from one goroutine: a NOTIFY inside the commit
// would hold PostgreSQL's database-wide notify lock through its WAL flush
// and serialize every commit), so events of any size travel. Every host's Listen reads the
// rows whose transactions committed since the snapshot of its previous
// read, so it gets each event once, only if its commit landed, each
// session's in commit order, and after a reconnection the events committed
// while it was away (kept for EventRetention).
package pgstore
