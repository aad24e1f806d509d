package api

import "github.com/cairn-dev/cairn/session"

// Protocol-level error codes, in addition to the session codes
// (session.Codes). protocol/PROTOCOL.md §7 lists them all.
const (
	// CodeBadRequest: the message is not a well-formed request, or its
	// params have the wrong shape.
	CodeBadRequest session.Code = "bad_request"
	// CodeMethodNotFound: the request names no method of the protocol.
	CodeMethodNotFound session.Code = "method_not_found"
	// CodeUnavailable: the daemon is shutting down, or could not be reached.
	CodeUnavailable session.Code = "unavailable"
)

// ProtocolCodes lists the protocol-level codes, in a stable order.
func ProtocolCodes() []session.Code {
	return []session.Code{CodeBadRequest, CodeMethodNotFound, CodeUnavailable}
}

// Codes lists every code that may appear on the wire: the session codes,
// then the protocol codes.
func Codes() []session.Code {
	return append(session.Codes(), ProtocolCodes()...)
}
