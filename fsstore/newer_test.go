package fsstore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// WriteNewerSession gives the store at dir (closed) two sessions a newer
// cairn wrote to: "fut", whose third commit is of schema 2 and holds a
// checkpoint of run "r-new", and "born-new", whose only commit is.
func writeNewerSessions(t *testing.T, dir string) {
	t.Helper()
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		must(t, second(s.Commit(bg, "fut", &session.Change{AppendMessages: []session.Value{message(i)}}, session.CommitOptions{})))
	}
	must(t, second(s.Commit(bg, "ok", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})))
	must(t, s.Close())
	log := filepath.Join(dir, ".cairn", "sessions", "s-fut.log")
	cp := &session.LoopCheckpoint{RunID: "r-new", SessionID: "fut", Turn: 3, State: session.Value(`{"v":2}`)}
	must(t, appendBytes(log, fsstore.NewerCommitForTest(2, fsstore.KindCheckpointForTest, cp, 3)))
	born := append([]byte(fsstore.LogMagicForTest), fsstore.NewerCommitForTest(2, fsstore.KindResetForTest, fsstore.ResetForTest("born-new"), 1)...)
	must(t, os.WriteFile(filepath.Join(dir, ".cairn", "sessions", "s-born-new.log"), born, 0o600))
}

// TestNewerSchemaNamed: a session a newer cairn wrote to is listed with
// its state, and every call that touches it, by the session or by a run
// it records, answers schema_unsupported; its bytes are not changed.
func TestNewerSchemaNamed(t *testing.T) {
	dir := t.TempDir()
	writeNewerSessions(t, dir)
	log := filepath.Join(dir, ".cairn", "sessions", "s-fut.log")
	before, _ := os.ReadFile(log)
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list, err := s.List(bg)
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %v %+v", err, list)
	}
	want := map[string]string{"born-new": fsstore.StateUnsupported, "fut": fsstore.StateUnsupported, "ok": ""}
	for _, sum := range list {
		if sum.State != want[sum.SessionID] {
			t.Errorf("list shows %s as %q, want %q", sum.SessionID, sum.State, want[sum.SessionID])
		}
	}
	for what, err := range map[string]error{
		"load":       second(s.Load(bg, "fut", 0)),
		"head":       third(s.Head(bg, "fut")),
		"commit":     second(s.Commit(bg, "fut", &session.Change{AppendMessages: []session.Value{message(3)}}, session.CommitOptions{})),
		"checkpoint": second(s.Checkpoint(bg, "r-new")),
		"find run":   second(s.FindRun(bg, "r-new")),
		"new commit": second(s.Commit(bg, "born-new", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})),
		"repair":     second(s.Repair(bg, session.RepairRequest{SessionID: "fut", Apply: true})),
	} {
		if session.CodeOf(err) != session.CodeSchemaUnsupported {
			t.Errorf("%s: %v, want schema_unsupported", what, err)
		}
	}
	if _, err := s.FindRun(bg, "r-unknown"); session.CodeOf(err) != session.CodeNotFound {
		t.Errorf("an unknown run: %v, want not_found", err)
	}
	if _, err := s.Commit(bg, "ok", &session.Change{AppendMessages: []session.Value{message(2)}}, session.CommitOptions{}); err != nil {
		t.Fatalf("another session: %v", err)
	}
	if after, _ := os.ReadFile(log); string(after) != string(before) {
		t.Fatal("the newer log was changed")
	}
}

// TestOneBadFileAmongMany: a session log that cannot be opened (a link, a
// directory, an immutable file as root, a read-only file otherwise) makes
// that one session unavailable and listed; the store opens and serves the
// others.
func TestOneBadFileAmongMany(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, log string) bool // false: cannot run here
	}{
		{"a symlink", func(t *testing.T, log string) bool {
			outside := filepath.Join(t.TempDir(), "x.log")
			must(t, os.Rename(log, outside))
			must(t, os.Symlink(outside, log))
			return true
		}},
		{"a directory", func(t *testing.T, log string) bool {
			must(t, os.Remove(log))
			must(t, os.Mkdir(log, 0o700))
			return true
		}},
		{"immutable", func(t *testing.T, log string) bool {
			if os.Geteuid() != 0 {
				t.Log("not root: chattr +i needs CAP_LINUX_IMMUTABLE; the read-only case covers this user")
				return false
			}
			if err := setImmutable(log, true); err != nil {
				t.Logf("this file system has no immutable flag (%v); the other cases still run", err)
				return false
			}
			t.Cleanup(func() { _ = setImmutable(log, false) })
			return true
		}},
		{"read-only", func(t *testing.T, log string) bool {
			if os.Geteuid() == 0 {
				t.Log("root opens a 0400 file for writing anyway; the immutable case covers root")
				return false
			}
			must(t, os.Chmod(log, 0o400))
			return true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := fsstore.Open(dir, fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"a", "bad", "c"} {
				must(t, second(s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})))
			}
			must(t, s.Close())
			if !tc.setup(t, filepath.Join(dir, ".cairn", "sessions", "s-bad.log")) {
				t.Skip("this case cannot be set up here (see the log)")
			}
			s, err = fsstore.Open(dir, fsstore.Options{})
			if err != nil {
				t.Fatalf("one bad log stopped the store from opening: %v", err)
			}
			defer s.Close()
			for _, id := range []string{"a", "c"} {
				if _, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{message(2)}}, session.CommitOptions{}); err != nil {
					t.Fatalf("session %s: %v", id, err)
				}
			}
			if _, err := s.Load(bg, "bad", 0); err == nil {
				t.Fatal("the bad session was served")
			}
			if _, err := s.Commit(bg, "bad", &session.Change{AppendMessages: []session.Value{message(2)}}, session.CommitOptions{}); err == nil {
				t.Fatal("a commit to the bad session was taken")
			}
			list, err := s.List(bg)
			if err != nil || len(list) != 3 || list[1].SessionID != "bad" || list[1].State != fsstore.StateUnreadable || list[1].Problem == "" {
				t.Fatalf("list: %v %+v", err, list)
			}
		})
	}
}
