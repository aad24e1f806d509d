package protocol

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/proc"
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
	// ErrNoAnswer is matched by a NoAnswerError: a call that got no answer
	// within Options.CallTimeout (whether the daemon carried the request
	// out is unknown), or a handshake the daemon did not answer. Such an
	// error also matches ErrUnavailable.
	ErrNoAnswer = errors.New("protocol: no answer in time")
	// ErrNoDaemon is returned by Dial and Connect when no daemon answers at
	// the workspace's socket (and, for Connect, none could be started).
	ErrNoDaemon = errors.New("protocol: no daemon")
	// ErrTooLarge is returned when a request would exceed the message size
	// limit; nothing is sent. It unwraps to session.ErrTooLarge as well.
	ErrTooLarge = fmt.Errorf("protocol: message too large: %w", session.ErrTooLarge)
)

// NoAnswerError is a daemon's silence: a call that got no answer within
// Options.CallTimeout (Method set; its outcome is unknown), or a
// connection whose handshake the daemon took and did not answer before
// the caller's context ended (Socket set): a cairnd that is stopped, stuck
// on its disk or overloaded. It matches ErrNoAnswer and ErrUnavailable.
type NoAnswerError struct {
	Method string        // the call's method; "" for a handshake
	Socket string        // the handshake's socket
	After  time.Duration // how long the client waited
	PID    int           // a handshake's: the cairnd holding the workspace (0: unknown)
	State  byte          // its state letter from /proc (internal/proc.State; 0: unknown)
}

func (e *NoAnswerError) Error() string {
	if e.Method != "" {
		return fmt.Sprintf("protocol: no answer to %s from cairnd within %v: the outcome is unknown (a request that reached the daemon may still be carried out)", e.Method, e.After)
	}
	return "protocol.Dial " + e.Socket + ": " + e.Reason()
}

// Reason says, for people, what a handshake's NoAnswerError means and
// what to do about it: which daemon, what state it is in.
func (e *NoAnswerError) Reason() string {
	if e.PID <= 0 {
		return fmt.Sprintf("cairnd did not answer the connection within %v", e.After)
	}
	head := fmt.Sprintf("cairnd (pid %d) did not answer the connection within %v: ", e.PID, e.After)
	switch e.State {
	case 'T':
		return head + fmt.Sprintf("it is stopped (SIGSTOP, or a shell's ^Z); `kill -CONT %d` resumes it, `cairn daemon stop` ends it", e.PID)
	case 't':
		return head + "it is stopped by a debugger; resume it there, or `cairn daemon stop` ends it once it runs"
	case 'D':
		return head + "it is waiting on the disk (uninterruptible sleep); calls wait with it until the disk answers"
	case 0:
		return head + "its state cannot be read; `cairn daemon stop` ends it"
	}
	return head + fmt.Sprintf("it is running (state %c) but did not take the connection; `cairn daemon stop` ends it", e.State)
}

// FindHolder names, in a handshake's error, the cairnd holding
// workspace's lock (DaemonPID) and its state from /proc, when they can be
// told; a Dial by socket knows no workspace, so its caller may.
func (e *NoAnswerError) FindHolder(workspace string) {
	if e.PID = DaemonPID(workspace); e.PID > 0 {
		e.State = proc.State(e.PID)
	}
}

func (e *NoAnswerError) Is(target error) bool {
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
