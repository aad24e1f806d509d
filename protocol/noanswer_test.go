package protocol_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/protocol"
)

// TestNoAnswerReason: a handshake's NoAnswerError tells people what the
// holding daemon's state means and what to do, for each state /proc can
// report. TestConnectToAStoppedDaemon reaches 'T' through a real daemon;
// a debugger's stop ('t') and a wait on the disk ('D') cannot be made
// to order in a test, so their wording is checked here.
func TestNoAnswerReason(t *testing.T) {
	for _, tc := range []struct {
		pid   int
		state byte
		want  string
	}{
		{0, 0, "cairnd did not answer the connection within 2s"},
		{42, 'T', "it is stopped (SIGSTOP, or a shell's ^Z); `kill -CONT 42` resumes it"},
		{42, 't', "it is stopped by a debugger; resume it there"},
		{42, 'D', "it is waiting on the disk (uninterruptible sleep)"},
		{42, 0, "its state cannot be read"},
		{42, 'S', "it is running (state S) but did not take the connection"},
	} {
		e := &protocol.NoAnswerError{Socket: "/s", After: 2 * time.Second, PID: tc.pid, State: tc.state}
		got := e.Error()
		if !strings.HasPrefix(got, "protocol.Dial /s: ") || !strings.Contains(got, tc.want) {
			t.Errorf("pid %d state %q: %q, want it to say %q", tc.pid, tc.state, got, tc.want)
		}
		if tc.pid > 0 && !strings.Contains(got, "cairnd (pid 42) did not answer the connection within 2s: ") {
			t.Errorf("pid %d state %q: %q does not name the daemon", tc.pid, tc.state, got)
		}
	}
}
