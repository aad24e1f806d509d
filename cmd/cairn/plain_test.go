package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// internals are the marks of Go internals that errors must not show
// unless --log-level debug.
var internals = []string{"protocol.", "cairnd resumeSession", "lstat", "http://cairnd", "not_found:"}

// TestPlainErrors: errors in plain words; the internals only under
// --log-level debug; under --json an object with code and message and the
// same exit status.
func TestPlainErrors(t *testing.T) {
	ws := newWorkspace(t)
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })
	cases := []struct {
		name string
		args []string
		code int
		json string
		says string
	}{
		{"no such session", []string{"show", "nope"}, 3, "not_found", `session "nope" not found`},
		{"no such workspace", []string{"ls", "--workspace", filepath.Join(ws, "missing")}, 1, "invalid_argument", "no such file or directory"},
		{"usage", []string{"show"}, 2, "usage", "show takes one session ID"},
		{"bad flag", []string{"ls", "--nope"}, 2, "usage", "unknown flag --nope"},
		{"no daemon at --socket", []string{"ls", "--socket", filepath.Join(ws, "none.sock")}, 1, "unavailable", "no cairnd answers at " + filepath.Join(ws, "none.sock")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := cli(t, ws, "", tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.says) {
				t.Fatalf("%v: %d %q, want %d and %q", tc.args, code, errs, tc.code, tc.says)
			}
			for _, bad := range internals {
				if strings.Contains(errs, bad) {
					t.Fatalf("%v: %q shows %q", tc.args, errs, bad)
				}
			}
			out, _, code := cli(t, ws, "", append(tc.args, "--json")...)
			var obj struct{ Code, Message string }
			if code != tc.code || json.Unmarshal([]byte(out), &obj) != nil || obj.Code != tc.json || !strings.Contains(obj.Message, tc.says) {
				t.Fatalf("%v --json: %d %q, want %d and code %q", tc.args, code, out, tc.code, tc.json)
			}
		})
	}
	// A daemon that exits at start: what it was, and where its log is.
	dead := newWorkspace(t)
	_, errs, code := cliEnv(t, dead, "", []string{"CAIRN_DAEMON=/bin/false"}, "ls")
	if code != 1 || !strings.Contains(errs, "but it exited") || !strings.Contains(errs, "cairnd.log") {
		t.Fatalf("ls with a daemon that exits: %d %q", code, errs)
	}
	for _, bad := range internals {
		if strings.Contains(errs, bad) {
			t.Fatalf("ls with a daemon that exits: %q shows %q", errs, bad)
		}
	}
	out, _, code := cliEnv(t, dead, "", []string{"CAIRN_DAEMON=/bin/false"}, "ls", "--json")
	var obj struct{ Code string }
	if code != 1 || json.Unmarshal([]byte(out), &obj) != nil || obj.Code != "unavailable" {
		t.Fatalf("ls --json with a daemon that exits: %d %q", code, out)
	}
	_, errs, code = cli(t, ws, "", "show", "nope", "--log-level", "debug")
	if code != 3 || !strings.Contains(errs, "cairnd resumeSession") {
		t.Fatalf("--log-level debug: %d %q, want the error whole", code, errs)
	}
}

// TestShowTail: show prints the last messages, 10 unless --messages N.
func TestShowTail(t *testing.T) {
	ws := newWorkspace(t)
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })
	var msgs []string
	for i := range 12 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"message number %d"}`, i))
	}
	f := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(f, []byte(`{"schema_version":1,"session_id":"s","messages":[`+strings.Join(msgs, ",")+`]}`), 0o600)
	if out, errs, code := cli(t, ws, "", "import", f); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	for _, tc := range []struct {
		args       []string
		has, lacks []string
	}{
		{[]string{"show", "s"}, []string{"user: message number 2\n", "user: message number 11\n", "last 10 of 12"}, []string{"number 1\n"}},
		{[]string{"show", "s", "--messages", "1"}, []string{"[11] user: message number 11\n"}, []string{"number 10\n"}},
		{[]string{"show", "s", "--messages", "0"}, nil, []string{"message number"}},
		{[]string{"show", "s", "--messages", "50"}, []string{"[0] user: message number 0\n", "message number 11"}, nil},
	} {
		out, errs, code := cli(t, ws, "", tc.args...)
		if code != 0 {
			t.Fatalf("%v: %d %q", tc.args, code, errs)
		}
		for _, s := range tc.has {
			if !strings.Contains(out, s) {
				t.Errorf("%v: lacks %q:\n%s", tc.args, s, out)
			}
		}
		for _, s := range tc.lacks {
			if strings.Contains(out, s) {
				t.Errorf("%v: has %q:\n%s", tc.args, s, out)
			}
		}
	}
	if _, _, code := cli(t, ws, "", "ls", "--messages", "3"); code != 2 {
		t.Fatalf("--messages with ls: %d, want 2", code)
	}
}

// TestHelpPerCommand: every command has its help, by --help and by help.
func TestHelpPerCommand(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"init", "daemon", "ls", "show", "runs", "resume", "rm", "messages", "artifacts",
		"handoff", "runtime", "export", "import", "verify", "repair", "version", "help"} {
		a, _, c1 := cli(t, dir, "", cmd, "--help")
		b, _, c2 := cli(t, dir, "", "help", cmd)
		if c1 != 0 || c2 != 0 || a != b || !strings.HasPrefix(a, "usage: cairn "+cmd) {
			t.Errorf("%s: --help %d %q; help %d %q", cmd, c1, a, c2, b)
		}
	}
	if out, _, code := cli(t, dir, "", "show", "--help"); code != 0 || !strings.Contains(out, "--messages N") {
		t.Errorf("show --help: %d %q", code, out)
	}
	if _, _, code := cli(t, dir, "", "help", "bogus"); code != 2 {
		t.Errorf("help bogus: %d, want 2", code)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("help made %v", got)
	}
}
