package session_test

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/session"
)

func TestWrapKeepsCodeAndCause(t *testing.T) {
	cause := &fs.PathError{Op: "write", Path: "/x/s.log", Err: syscall.ENOSPC}
	for _, tc := range []struct {
		name string
		err  error
		code session.Code
		msg  string
	}{
		{"io", session.Wrap(session.CodeInternal, cause, "fsstore.Commit"), session.CodeInternal, "internal: fsstore.Commit: write /x/s.log: no space left on device"},
		// The outer code decides, even when the cause carries another.
		{"coded cause", session.Wrap(session.CodeInternal, session.Wrap(session.CodeNotFound, cause, "load"), "op %d", 1), session.CodeInternal, "internal: op 1: not_found: load: write /x/s.log: no space left on device"},
		{"nil cause", session.Wrap(session.CodeConflict, nil, "gen %d", 2), session.CodeConflict, "conflict: gen 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := session.CodeOf(tc.err); got != tc.code {
				t.Errorf("CodeOf = %q, want %q", got, tc.code)
			}
			if !errors.Is(tc.err, session.SentinelOf(tc.code)) {
				t.Errorf("not errors.Is its sentinel")
			}
			if tc.err.Error() != tc.msg {
				t.Errorf("Error() = %q, want %q", tc.err.Error(), tc.msg)
			}
			if tc.name == "nil cause" {
				return
			}
			var pe *fs.PathError
			if !errors.Is(tc.err, syscall.ENOSPC) || !errors.As(tc.err, &pe) || pe.Path != "/x/s.log" {
				t.Errorf("cause not reachable: Is ENOSPC %v, As PathError %v", errors.Is(tc.err, syscall.ENOSPC), pe)
			}
		})
	}
}
