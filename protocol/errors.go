package protocol

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Sentinel errors of this package.
var (
	// ErrBadRequest is wrapped by a RemoteError with code bad_request, and
	// returned by DecodeRequest for a malformed message.
	ErrBadRequest = errors.New("protocol: bad_request")
	// ErrMethodNotFound is wrapped by a RemoteError with code
	// method_not_found.
	ErrMethodNotFound = errors.New("protocol: method_not_found")
	// ErrUnavailable is wrapped by a RemoteError with code unavailable.
	ErrUnavailable = errors.New("protocol: unavailable")
	// ErrClosed is returned by calls on a Client after Close.
	ErrClosed = errors.New("protocol: client closed")
	// ErrConnectionLost is returned by calls whose connection broke before
	// the answer arrived; whether the daemon carried the request out is
	// unknown.
	ErrConnectionLost = errors.New("protocol: connection lost")
	// ErrNoAnswer is wrapped by the error of a call that got no answer
	// within Options.CallTimeout; whether the daemon carried the request
	// out is unknown. Such an error also wraps ErrUnavailable.
	ErrNoAnswer = errors.New("protocol: no answer in time")
	// ErrNoDaemon is returned by Dial and Connect when no daemon answers at
	// the workspace's socket (and, for Connect, none could be started).
	ErrNoDaemon = errors.New("protocol: no daemon")
	// ErrTooLarge is returned when a request would exceed the message size
	// limit; nothing is sent. It unwraps to session.ErrTooLarge as well.
	ErrTooLarge = fmt.Errorf("protocol: message too large: %w", session.ErrTooLarge)
)

// noAnswerError is a call's failure to get an answer within
// Options.CallTimeout.
type noAnswerError struct {
	method string
	after  time.Duration
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("protocol: no answer to %s from cairnd within %v: the outcome is unknown (a request that reached the daemon may still be carried out)", e.method, e.after)
}

func (e *noAnswerError) Is(target error) bool {
	return target == ErrNoAnswer || target == ErrUnavailable
}

// WireError is the error object of a failure response.
type WireError struct {
	Code    string         `cbor:"code" json:"code"`
	Message string         `cbor:"message" json:"message"`
	Data    map[string]any `cbor:"data,omitempty" json:"data,omitempty"`
}

// RemoteError is an error answered by the daemon. It unwraps to the sentinel
// of its code: a session sentinel (errors.Is(err, session.ErrConflict)) or
// one of this package's (ErrBadRequest, ErrMethodNotFound, ErrUnavailable).
type RemoteError struct {
	Method  string // the method called
	Code    session.Code
	Message string
	Data    map[string]any
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("cairnd %s: %s: %s", e.Method, e.Code, e.Message)
}

// Unwrap returns the sentinel error of the code.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case api.CodeBadRequest:
		return ErrBadRequest
	case api.CodeMethodNotFound:
		return ErrMethodNotFound
	case api.CodeUnavailable:
		return ErrUnavailable
	}
	return session.SentinelOf(e.Code)
}

// HolderPID returns the pid in a locked error's data, or 0.
func (e *RemoteError) HolderPID() int {
	switch v := e.Data["pid"].(type) {
	case uint64:
		return int(v)
	case int64:
		return int(v)
	}
	return 0
}

// CodeOf reports the wire code of err: the code of a RemoteError, the
// protocol code of a protocol sentinel (ErrNoDaemon and ErrConnectionLost
// are unavailable: no daemon answered), else session.CodeOf(err).
func CodeOf(err error) session.Code {
	var re *RemoteError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &re):
		return re.Code
	case errors.Is(err, ErrBadRequest):
		return api.CodeBadRequest
	case errors.Is(err, ErrMethodNotFound):
		return api.CodeMethodNotFound
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrNoDaemon), errors.Is(err, ErrConnectionLost):
		return api.CodeUnavailable
	}
	return session.CodeOf(err)
}

// ErrorFor turns an error into the wire error object: its code, its message
// and, for a lock held by another process, the holder's pid.
func ErrorFor(err error) WireError {
	we := WireError{Code: string(CodeOf(err)), Message: err.Error()}
	var le *session.LockedError
	if errors.As(err, &le) && le.PID > 0 {
		we.Data = map[string]any{"pid": uint64(le.PID)}
	}
	var re *RemoteError
	if errors.As(err, &re) {
		we.Message, we.Data = re.Message, re.Data
	}
	var se *session.Error
	if errors.As(err, &se) {
		we.Message = se.Message
	}
	return we
}
