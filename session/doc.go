// Package session defines what cairn stores: the session snapshot and its
// parts, the Change a commit applies, loop and workflow checkpoints, the
// validation rules every store and every entry point share, the stable error
// codes, and the Store contract with an in-memory implementation.
//
// Nothing here knows about files or sockets. A Store implementation decides
// how the state is kept; this package decides what a commit means: Apply is
// the one definition of how a Change turns generation N into N+1, and every
// store (MemStore here, fsstore on disk) replays commits through it.
//
// Opaque host data (messages, trace data, loop state, step results, metadata
// values) is kept as raw JSON text and handed back byte for byte as it was
// given. Times are normalised to UTC.
package session
