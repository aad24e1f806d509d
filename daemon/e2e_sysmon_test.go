//go:build linux

package daemon_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// godebugOf reads the GODEBUG that a running process started with.
func godebugOf(t *testing.T, pid int) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), "GODEBUG="); ok {
			return v, true
		}
	}
	return "", false
}

// TestCairndKeepsSysmonAwake checks that the cairnd that answers (same pid
// as the one started) runs with schedtrace set, keeping the other GODEBUG
// settings it was given, and that an operator's own schedtrace is kept.
func TestCairndKeepsSysmonAwake(t *testing.T) {
	for _, tc := range []struct {
		name, given, want string
	}{
		{"unset", "", "schedtrace=2147483647"},
		{"other settings kept", "madvdontneed=1", "madvdontneed=1,schedtrace=2147483647"},
		{"operator's schedtrace kept", "schedtrace=600000", "schedtrace=600000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.given == "" {
				t.Setenv("GODEBUG", "")
				os.Unsetenv("GODEBUG")
			} else {
				t.Setenv("GODEBUG", tc.given)
			}
			p := startCairnd(t, t.TempDir())
			got, ok := godebugOf(t, p.cmd.Process.Pid)
			if !ok || got != tc.want {
				t.Fatalf("cairnd's GODEBUG = %q (set: %v), want %q", got, ok, tc.want)
			}
		})
	}
}
