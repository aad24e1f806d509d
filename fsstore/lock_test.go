package fsstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// commitN appends message n to session id, expecting generation n-1.
func commitN(s *fsstore.Store, id string, n int) error {
	_, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{message(n)}}, session.CommitOptions{ExpectGeneration: session.Expect(uint64(n - 1))})
	return err
}

// wantGens checks that the store at dir holds session id at generation n
// with messages 1..n.
func wantGens(t *testing.T, dir, id string, n int) {
	t.Helper()
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load(bg, id, 0)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if int(st.Snapshot.Generation) != n || len(st.Snapshot.Messages) != n {
		t.Fatalf("%s: session %q at generation %d with %d messages, want %d", dir, id, st.Snapshot.Generation, len(st.Snapshot.Messages), n)
	}
	for i, m := range st.Snapshot.Messages {
		if string(m) != string(message(i+1)) {
			t.Fatalf("%s: message %d differs", dir, i+1)
		}
	}
}

// TestLockSurvivesDeletedLockFile deletes .cairn/LOCK under an open store:
// a second Open is still refused, the first store goes on committing and
// puts LOCK back with its pid, and nothing acknowledged is lost.
func TestLockSurvivesDeletedLockFile(t *testing.T) {
	dir := t.TempDir()
	s, err := fsstore.Open(dir, fsstore.Options{})
	must(t, err)
	defer s.Close()
	must(t, commitN(s, "a", 1))
	lockPath := filepath.Join(dir, ".cairn", "LOCK")
	must(t, os.Remove(lockPath))
	if s2, err := fsstore.Open(dir, fsstore.Options{}); !errors.Is(err, session.ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second open with LOCK deleted: %v, want locked", err)
	}
	for n := 2; n <= 5; n++ {
		must(t, commitN(s, "a", n))
	}
	must(t, s.SaveStep(bg, "w", "a", session.StepRecord{StepID: "x", Identity: "i"}))
	b, err := os.ReadFile(lockPath)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("LOCK after the next commit holds %q (%v), want this pid", b, err)
	}
	// With LOCK back, a second writer learns who holds the store.
	_, err = fsstore.Open(dir, fsstore.Options{})
	var le *session.LockedError
	if !errors.As(err, &le) || le.HolderPID() != os.Getpid() {
		t.Fatalf("second open after LOCK came back: %v, want locked by pid %d", err, os.Getpid())
	}
	must(t, s.Close())
	wantGens(t, dir, "a", 5)
}

// TestLockLost replaces, under an open store, what its lock stands for.
// From then on the store acknowledges nothing, with code locked, while
// what it acknowledged before stays where it was written.
func TestLockLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		// replace does the damage in workspace dir and returns the store
		// directory that now holds the first store's writes ("" if none
		// moved).
		replace func(t *testing.T, dir string) string
		// second reports whether a second store may open dir afterwards.
		second bool
	}{
		{"cairn dir renamed and recreated", func(t *testing.T, dir string) string {
			moved := filepath.Join(t.TempDir(), "old")
			must(t, os.Mkdir(moved, 0o700))
			must(t, os.Rename(filepath.Join(dir, ".cairn"), filepath.Join(moved, ".cairn")))
			must(t, os.Mkdir(filepath.Join(dir, ".cairn"), 0o700))
			return moved
		}, true},
		{"workspace renamed and recreated", func(t *testing.T, dir string) string {
			moved := filepath.Join(t.TempDir(), "old")
			must(t, os.Rename(dir, moved))
			must(t, os.Mkdir(dir, 0o700))
			return moved
		}, true},
		{"sessions dir renamed and recreated", func(t *testing.T, dir string) string {
			sessions := filepath.Join(dir, ".cairn", "sessions")
			must(t, os.Rename(sessions, sessions+".old"))
			must(t, os.Mkdir(sessions, 0o700))
			return ""
		}, false},
		{"LOCK replaced and locked by another", func(t *testing.T, dir string) string {
			// An older build locks only the file: it must not be able to
			// write beside this store unnoticed.
			lockPath := filepath.Join(dir, ".cairn", "LOCK")
			must(t, os.Remove(lockPath))
			f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
			must(t, err)
			t.Cleanup(func() { f.Close() })
			must(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
			return ""
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			must(t, os.Mkdir(dir, 0o700))
			s, err := fsstore.Open(dir, fsstore.Options{})
			must(t, err)
			defer s.Close()
			must(t, commitN(s, "a", 1))
			must(t, commitN(s, "a", 2))
			moved := tc.replace(t, dir)
			var s2 *fsstore.Store
			if tc.second {
				if s2, err = fsstore.Open(dir, fsstore.Options{}); err != nil {
					t.Fatalf("open of the new directory: %v", err)
				}
				defer s2.Close()
				must(t, commitN(s2, "a", 1))
			}
			refused := map[string]func() error{
				"commit":       func() error { return commitN(s, "a", 3) },
				"new session":  func() error { return commitN(s, "b", 1) },
				"step":         func() error { return s.SaveStep(bg, "w", "a", session.StepRecord{StepID: "x", Identity: "i"}) },
				"delete":       func() error { return s.Delete(bg, "a") },
				"compact":      func() error { return s.Compact(bg, "a") },
				"copy":         func() error { _, err := s.Copy(bg, "a", "c", 0, nil); return err },
				"commit again": func() error { return commitN(s, "a", 3) },
			}
			for _, op := range []string{"commit", "new session", "step", "delete", "compact", "copy", "commit again"} {
				err := refused[op]()
				if op == "copy" && err != nil {
					continue // it reads its source by name first, which may be gone
				}
				if session.CodeOf(err) != session.CodeLocked || !strings.Contains(err.Error(), "lock") {
					t.Fatalf("%s after the lock was lost: %v, want code locked", op, err)
				}
			}
			must(t, s.Close())
			if s2 != nil {
				must(t, commitN(s2, "a", 2))
				must(t, s2.Close())
				wantGens(t, dir, "a", 2) // the second store's own saves
			}
			if moved != "" {
				wantGens(t, moved, "a", 2) // the first store's, where it wrote them
			}
		})
	}
}

// TestDeletedLogRefusesCommits removes a session's open log: commits,
// which would go to the unlinked file and vanish at the next open, are
// refused instead.
//
// It and TestReplacedLogRefusesCommits run with the writer lock's watch
// (fsstore skips the log's stat while nothing in sessions changed) and
// append first, so the log has been found where it should be at an epoch
// the removal has to move on.
func TestDeletedLogRefusesCommits(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	must(t, fsstore.LockWatching(s))
	must(t, commitN(s, "a", 1))
	must(t, commitN(s, "a", 2))
	must(t, commitN(s, "a", 3))
	must(t, os.Remove(filepath.Join(dir, ".cairn", "sessions", "s-a.log")))
	if err := commitN(s, "a", 4); err == nil || !strings.Contains(err.Error(), "removed or replaced") {
		t.Fatalf("commit to a deleted log: %v", err)
	}
}

// TestReplacedLogRefusesCommits puts another file in place of a session's
// open log after commits appended to it: the next commit, which would go
// to the file no path names any more, is refused.
func TestReplacedLogRefusesCommits(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	must(t, fsstore.LockWatching(s))
	must(t, commitN(s, "a", 1))
	must(t, commitN(s, "a", 2)) // an append: the log's identity is known now
	must(t, commitN(s, "a", 3)) // and skipped while nothing changed
	log := filepath.Join(dir, ".cairn", "sessions", "s-a.log")
	data, err := os.ReadFile(log)
	must(t, err)
	must(t, os.WriteFile(log+".copy", data, 0o600))
	must(t, os.Rename(log+".copy", log))
	if err := commitN(s, "a", 4); err == nil || !strings.Contains(err.Error(), "removed or replaced") {
		t.Fatalf("commit to a replaced log: %v", err)
	}
}
