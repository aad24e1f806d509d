// Package engine implements cairn's operations (save, resumeSession, runs
// with checkpoints and resumeRun, resumable workflows, list, delete, fork,
// export and import) once, over any session.Store, so the daemon and the
// embedded C API give exactly the same answers.
//
// # Guarantees
//
//   - Every write is one Store.Commit: a reader sees generation N or N+1,
//     never a mix, and (on a durable store) a call that returned has been
//     fsynced. A checkpoint's messages and its loop checkpoint land in the
//     same commit; so do a run's end and the deletion of its checkpoint.
//   - Everything is validated before anything is written
//     (session.Normalize, which every engine commit passes through: Save,
//     Checkpoint, CompleteRun, ResumeRun, BeginRun, Fork, Import). On error
//     nothing of the call is visible.
//   - expect_generation makes Save a compare-and-swap: of concurrent savers
//     naming the same generation exactly one wins, the rest get conflict.
//   - Read-modify-write operations (BeginRun, Checkpoint, CompleteRun,
//     ResumeRun, saving a whole snapshot) run under a per-session lock in
//     this engine and commit as a compare-and-swap on the generation they
//     read, retrying from the read when a writer outside this engine got
//     there first. Run ids are claimed under an engine-wide lock, so a run
//     id names at most one run that this engine created.
//   - No checkpoint outlives its run: CompleteRun deletes it, Save of a run
//     as completed or failed deletes it, Delete deletes the session's
//     checkpoints and the workflows it owns.
//   - ResumeRun never falls back: a run without a checkpoint (unknown,
//     ended, never checkpointed) is no_checkpoint; a run addressed through
//     a session that does not record it is not_owner. Usage and tool-call
//     counts continue from the checkpoint, never from zero. The resumed
//     run's checkpoint is kept until its successor's first checkpoint, so a
//     crash right after resuming loses nothing, and retrying a resume with
//     the same new_run_id returns the same run without writing. See Run
//     lines.
//   - Opaque host values (messages, agent/metadata values, trace data,
//     subagent results, loop state, step results) come back byte for byte
//     from ResumeSession, ResumeRun and BeginWorkflow, and through
//     Export/Import.
//   - Workflows fail closed: a recorded step whose identity differs from
//     the spec given now makes BeginWorkflow fail with
//     step_identity_changed, and nothing is to run. CompleteStep is
//     durable when it returns.
//
// # Run lines
//
// A run line is a run started by BeginRun and the runs ResumeRun created
// from it, each naming its predecessor in ParentRunID. The successor of a
// run is the latest run naming it as parent; a run is superseded when it
// has a successor, or when it is a pending successor (running, never
// checkpointed) that a later resume of the same run replaced. The line's
// head, reached by following successors, is the only run that takes
// writes. A line holds at most one loop checkpoint: the head's own, or,
// while the head is a pending successor, the one it resumed from.
//
//   - BeginRun starts a line; its run id is unique across the store.
//   - Checkpoint writes only to the running head. A pending successor's
//     first checkpoint deletes the checkpoint it resumed from, in the same
//     commit.
//   - ResumeRun(R) needs R's own checkpoint. It creates the successor,
//     marks R interrupted and supersedes (marks interrupted) every pending
//     successor of R. R's checkpoint stays until the successor checkpoints
//     or ends; meanwhile ResumeSession lists R with ResumedAs. Retrying with
//     the pending successor's id is idempotent; after that successor
//     checkpointed or ended it is no_checkpoint naming it, after it was
//     superseded the id is taken (conflict).
//   - CompleteRun ends the head and deletes the line's checkpoint (its own,
//     or the one a pending successor resumed from): an ended line is not
//     resumable, whatever the status.
//   - Checkpoint and CompleteRun of a superseded run are not_owner, naming
//     the successor and the line's latest run, and write nothing: a host
//     whose run another host resumed cannot end the line under it.
//     ResumeRun of a superseded run without a checkpoint is no_checkpoint,
//     naming them the same way.
//   - Save writes run records as given: the rules read whatever the latest
//     generation records.
//   - Fork copies the runs with their parent links but no checkpoints, and
//     running copies become interrupted, so the copies are records and a
//     run id alone keeps addressing the live line (the session holding the
//     checkpoint, else one where the run is running). Import restores the
//     exported checkpoints, so the line goes on in the importing store.
//
// protocol/PROTOCOL.md ("Run lines") states the same rules for clients.
//
// # Secret hygiene
//
// What the secret rules (session/secrets.go) name — credential-named keys
// and credential-shaped values, at any depth — is dropped from a session's
// agent, metadata and artifact metadata before it reaches the store, on
// every path that writes a session: Save (snapshot or delta), Fork (which
// also drops what an older session's agent and metadata hold against
// today's rules) and Import (an imported document is scrubbed too).
// Verify with VerifyRequest.Secrets reports credential-shaped strings in
// content, which it never changes. Recorded processes keep environment
// variable names only: an env_keys entry holding "NAME=value" is rejected
// as invalid_argument, and its value is redacted from the error message. The
// rule lives in session.Normalize; the engine only guarantees that nothing
// reaches the store without passing through it. Messages, trace data and
// loop state are opaque: cairn does not change them, so a host must not
// put secrets there.
//
// # Errors
//
// Every error carries a stable code (session.CodeOf): invalid_argument,
// not_found, conflict, schema_unsupported, no_checkpoint, not_owner,
// step_identity_changed, too_large, locked, internal. Store failures that
// have no code of their own are wrapped with the engine operation that hit
// them and report internal.
//
// # Events
//
// After a commit is durable the engine publishes events to Subscribe
// callbacks (see the api.Event* constants). Callbacks run synchronously, in
// order, under the operation's locks: they must be fast and must not call
// back into the engine. A daemon puts events on a queue.
//
// # Limits and caveats
//
//   - api.Drift and the files touched after a checkpoint come from
//     Options.Workspace. Without a tracker, or for a generation saved
//     without a manifest, ResumeSession reports api.Drift with Tracked false
//     and the reason (unknown, never "no drift"), and ResumeRun reports
//     FilesTracked false. A tracker failure never fails a commit.
//   - ResumeSession runs the health check of every recorded process
//     (bounded by Options.ProbeTimeout): that is I/O on the resume path,
//     never a restart. ResumeSessionWith with Processes false skips it,
//     and with Drift false skips the workspace comparison.
//   - A resume costs the parts it returns: it is built from Store.Head and
//     the paged reads (never Store.Load), so a message tail with artifacts
//     as metadata costs the tail and the artifact list, not the session.
//     The reads are checked to come from the head's generation and
//     retried when a commit landed in between (the third time under the
//     session lock).
//   - No reply is built past Options.MaxReplyBytes (0:
//     DefaultMaxReplyBytes). Its size is known first, from what the store
//     reports: the session's live bytes when the whole session is asked
//     for (refused before any content is read), else the head, each
//     artifact's size (as base64) from the metadata listing and the pages
//     read with max_bytes set to what is left. Past the limit the read is
//     too_large and the error names the paged reads to use instead.
//     Messages and RunEvents lower limit and max_bytes so a page always
//     fits; one message, event or artifact larger than the limit is
//     too_large, naming it (an artifact before its data is read).
//   - The engine keeps no session content in memory. BeginRun,
//     Checkpoint, CompleteRun, ResumeRun, the runtime checks and Handoff
//     read the session's head (Store.Head: runs, checkpoints, runtime, no
//     messages, artifacts or traces), so a checkpoint costs one head read
//     and one delta commit whatever the session's size. ResumeRun then
//     reads the messages up to the boundary (Store.Messages), which is what
//     it returns. A whole-snapshot Save reads the whole latest generation
//     (Store.Load) to diff the snapshot against, so it costs the session's
//     size; a delta Save reads nothing.
//   - Fork and Import copy run ids. A fork never shares a live run (copied
//     running runs become interrupted and checkpoints are not copied); when
//     the same run id is recorded by several sessions, pass session_id to
//     Checkpoint and CompleteRun to address the right one.
//   - Export carries the session with its loop checkpoints and the
//     workflows it owns, so after import elsewhere a run left running
//     resumes from its checkpoint and a workflow skips its completed
//     steps. Workflows with no owner and workspace manifests are not
//     carried: touched files after such a resume are reported as not
//     tracked unless the importing workspace holds the manifest.
//   - The per-session and run-id locks serialise one engine. Two engines
//     over one store (which fsstore's writer lock prevents across
//     processes) still get correct generations from compare-and-swap, but
//     two concurrent BeginRun calls naming the same new id in different
//     sessions could both succeed.
package engine
