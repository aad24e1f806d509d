package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// fail reports err (nil: success) and returns the exit status. The message
// is in plain words; the error whole, with the operations it passed
// through, only under --log-level debug. Under --json it is the object
// {"code": ..., "message": ...} on standard output, with the same status.
func (e *env) fail(err error) int {
	if err == nil {
		return ExitOK
	}
	status, code := ExitFailure, string(protocol.CodeOf(err))
	switch {
	case errors.Is(err, errUsage):
		status, code = ExitUsage, "usage"
	case errors.Is(err, errIncomplete), errors.Is(err, errDamageFound):
		return ExitFailure // what is wrong is printed already
	case errors.Is(err, errNoWorkspace):
		status, code = ExitNotFound, "no_workspace"
	case errors.Is(err, errNoDaemonRunning):
		status, code = ExitNotFound, "not_running"
	case errors.As(err, new(*dirError)):
		code = string(session.CodeInvalidArgument)
	case code == string(session.CodeInternal) && strings.HasPrefix(err.Error(), connectPrefix):
		code = "unavailable" // no daemon could be started

	case code == string(session.CodeNotFound):
		status = ExitNotFound
	}
	if code == "" {
		code = "failed"
	}
	msg := plain(err)
	var printed *printedError
	if e.json && !errors.As(err, &printed) {
		obj := map[string]any{"code": code, "message": msg}
		if e.debug {
			obj["detail"] = err.Error()
		}
		e.printJSON(obj)
		return status
	}
	if e.debug && msg != err.Error() {
		fmt.Fprintf(e.stderr, "cairn: %s\n  (%v)\n", msg, err)
	} else {
		fmt.Fprintf(e.stderr, "cairn: %s\n", msg)
	}
	if status == ExitUsage {
		fmt.Fprintln(e.stderr, "(see cairn --help)")
	}
	return status
}

// printedError is the failure of a command that has printed its result
// already (runtime --restart): under --json too it is said on standard
// error, so standard output holds one JSON value.
type printedError struct {
	err   error
	plain string // what plain says: the error without its operations
}

func (e *printedError) Error() string { return e.err.Error() }
func (e *printedError) Unwrap() error { return e.err }

// plain says what went wrong without the internals: the daemon's own
// message rather than the method it answered, a file and what is wrong
// with it rather than the syscall, and that cairnd cannot be reached
// rather than the HTTP request that failed.
func plain(err error) string {
	var re *protocol.RemoteError
	var nw *noWorkspaceError
	var pe *fs.PathError
	var de *dirError
	var na *protocol.NoAnswerError
	switch {
	case errors.As(err, &nw):
		return nw.Error()
	case errors.As(err, &de):
		return de.Error()
	case errors.As(err, &na) && na.Method == "":
		return na.Reason()
	case errors.Is(err, errUsage):
		return strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
	case errors.As(err, &re):
		return re.Message
	case errors.Is(err, errNoDaemonRunning):
		return errNoDaemonRunning.Error()
	case strings.HasPrefix(err.Error(), connectPrefix):
		return connectMessage(err.Error())
	case strings.HasPrefix(err.Error(), dialPrefix):
		return dialMessage(err.Error())
	case errors.Is(err, protocol.ErrNoDaemon), errors.Is(err, protocol.ErrUnavailable):
		if _, rest, ok := strings.Cut(err.Error(), "no daemon at "); ok {
			path, _, _ := strings.Cut(rest, ": ")
			return "no cairnd answers at " + path
		}
		return "cannot reach cairnd, the workspace's daemon (--log-level debug says why)"
	case errors.Is(err, protocol.ErrConnectionLost):
		return "the connection to cairnd broke before it answered"
	case errors.As(err, &pe):
		return pe.Path + ": " + pe.Err.Error()
	}
	var printed *printedError
	if errors.As(err, &printed) && printed.plain != "" {
		return printed.plain
	}
	var se *session.Error
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}

// connectPrefix begins the errors of protocol.Connect.
const connectPrefix = "protocol.Connect: "

// connectMessage keeps what protocol.Connect says for people (which daemon
// it started, how it exited, where its log is, who holds the workspace)
// and drops the causes it wraps: the dial and handshake underneath.
func connectMessage(s string) string {
	s = strings.TrimPrefix(s, connectPrefix)
	s = strings.ReplaceAll(s, "protocol: no daemon: ", "")
	for _, cause := range []string{": protocol: ", ": locked: ", ": failed to WebSocket dial"} {
		if i := strings.Index(s, cause); i > 0 {
			s = s[:i]
		}
	}
	return s
}

// dialPrefix begins the errors of protocol.Dial.
const dialPrefix = "protocol.Dial "

// dialMessage says which socket refused and why, without the WebSocket
// library's words.
func dialMessage(s string) string {
	path, rest, _ := strings.Cut(strings.TrimPrefix(s, dialPrefix), ": ")
	switch {
	case strings.Contains(rest, "but got 403"):
		return "cairnd at " + path + " refused the connection (403 Forbidden: only the daemon's own user may connect)"
	case strings.HasPrefix(rest, "the daemon "), strings.HasPrefix(rest, "daemon "), strings.HasPrefix(rest, "hello: the daemon "):
		return "cairnd at " + path + ": " + connectMessage(rest)
	}
	return "cannot talk to cairnd at " + path + " (--log-level debug says why)"
}
