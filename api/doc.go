// Package api is cairn's contract on every wire: the request, result and
// event types, the error codes, the schema versions and one method table,
// Methods, from which the daemon's dispatch, the C API's method list, the
// Go client's typed calls and hello's method list are all derived.
//
// Field names are the json tags; the CBOR wire (protocol/PROTOCOL.md) and
// the C API's JSON use the same names and shapes. schema.json beside this
// file is generated from these types (go generate ./api) and checked
// against them by TestSchemaUpToDate; fixtures/ holds one example
// document per object type, shared by the Go tests and every binding's.
//
// api imports only package session and the standard library, so a program
// that only talks to cairnd links neither the engine nor the stores.
package api

//go:generate go run ./internal/schemagen
