// Package protocol is cairn's wire protocol: the message shapes, the CBOR
// codec that decodes untrusted input within named limits, the error codes,
// the socket address rules, and the Go client (with daemon auto-start).
//
// PROTOCOL.md beside this file is the specification; this package follows
// it. In short: WebSocket (subprotocol "cairn.v1") over the workspace's Unix
// socket, each binary message one CBOR map: a request {id, method, params},
// a response {id, result} or {id, error}, or a push {event, data}.
//
// Guarantees of the Client, stated up front:
//
//   - Concurrent calls share one connection, matched to their answers by
//     request id; one goroutine reads, one writes.
//   - A call whose context ends stops waiting and returns the context's
//     error; the connection stays up (the request may still be carried out
//     by the daemon: the outcome of an abandoned call is unknown).
//   - When the connection is lost, calls awaiting an answer fail with
//     ErrConnectionLost (outcome unknown); a Client made by Connect
//     reconnects, auto-starting the daemon, on the next call. A call whose
//     request never left (written on a connection whose daemon had died
//     before the reader saw it) is sent again, once, on the new connection.
//   - Events reach subscribers without ever blocking the reader: each
//     Subscription has a bounded buffer and counts what it drops.
//
// On top of the calls, two helpers: ParallelResumable runs a resumable
// workflow's steps, and StartRun / WithRun (run.go) give a host with its
// own agent loop an AgentRun that checkpoints each finished tool turn and
// resumes a session's interrupted run with its counters.
package protocol
