//go:build linux

package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/dirlock"
)

// watchedLock makes ws/a/d with a pinned sub, locks and checks it once
// (so Check has a quiet epoch), and fails the test if the lock has no
// watch: every test here is about the checks a watch lets Check skip.
// The epoch does not move by itself during the test, so what a Check
// catches, the watch's events made it look for.
func watchedLock(t *testing.T) (l *dirlock.Lock, ws, dir, sub string) {
	t.Helper()
	t.Cleanup(dirlock.SetRefresh(time.Hour))
	ws = t.TempDir()
	dir = filepath.Join(ws, "a", "d")
	sub = filepath.Join(dir, "sub")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	l = acquire(t, dir)
	if err := l.Watch(); err != nil {
		t.Fatalf("the lock on %s cannot have a watch here: %v", dir, err)
	}
	if err := l.Pin(sub); err != nil { // pinned after Watch: watched too
		t.Fatal(err)
	}
	if err := l.Watching(); err != nil {
		t.Fatalf("the lock on %s has no watch here: %v", dir, err)
	}
	for i := 0; i < 2; i++ {
		if err := l.Check(); err != nil {
			t.Fatal(err)
		}
	}
	return l, ws, dir, sub
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestWatchedCheckSeesEveryReplacement replaces, after a Check that
// passed, each thing the lock stands for: the next Check, which without
// the watch's events would skip its stats, finds the lock lost.
func TestWatchedCheckSeesEveryReplacement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T, ws, dir, sub string)
	}{
		{"directory renamed and made again", func(t *testing.T, ws, dir, sub string) {
			rename(t, dir, dir+".old")
			mkdirs(t, filepath.Join(dir, "sub"))
		}},
		{"parent renamed and made again", func(t *testing.T, ws, dir, sub string) {
			rename(t, filepath.Join(ws, "a"), filepath.Join(ws, "a.old"))
			mkdirs(t, filepath.Join(dir, "sub"))
		}},
		{"parent's contents swapped (its directory moved into a new one)", func(t *testing.T, ws, dir, sub string) {
			rename(t, filepath.Join(ws, "a"), filepath.Join(ws, "a.old"))
			mkdirs(t, filepath.Join(ws, "a"))
			rename(t, filepath.Join(ws, "a.old", "d"), dir)
			rename(t, dir, filepath.Join(ws, "a.old", "d"))
			mkdirs(t, sub)
		}},
		{"pin renamed and made again", func(t *testing.T, ws, dir, sub string) {
			rename(t, sub, sub+".old")
			mkdirs(t, sub)
		}},
		{"lock file replaced and locked by another", func(t *testing.T, ws, dir, sub string) {
			replaceLockFile(t, dir)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ws, dir, sub := watchedLock(t)
			tc.replace(t, ws, dir, sub)
			if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
				t.Fatalf("check after the %s: %v, want lost", tc.name, err)
			}
		})
	}
}

// TestWatchOffOnceAParentMoved moves a parent of the locked directory
// away and leaves a symbolic link to it in its place: the path still
// names the locked directory, so Check passes, but the watch no longer
// watches what the path goes through (a link, whose change raises no
// event on what it points to). Check must stat from then on: the link,
// pointed at a copy, loses the lock.
func TestWatchOffOnceAParentMoved(t *testing.T) {
	l, ws, dir, _ := watchedLock(t)
	a := filepath.Join(ws, "a")
	rename(t, a, a+".old")
	if err := os.Symlink(a+".old", a); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("check through the link to the same directory: %v", err)
	}
	if l.Watching() == nil {
		t.Fatal("the watch is still on after a watched parent moved")
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	mkdirs(t, filepath.Join(ws, "copy", "d", "sub"))
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "copy"), a); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
		t.Fatalf("check with %s a link to a copy: %v, want lost", dir, err)
	}
}

// TestEpoch: the epoch an owner keys its own checks on moves on when a
// name is made, renamed or removed in a pin, and stays put otherwise.
func TestEpoch(t *testing.T) {
	l, _, _, sub := watchedLock(t)
	epoch := func() uint64 {
		t.Helper()
		e, ok := l.Epoch()
		if !ok {
			t.Fatal("no epoch from a watched lock")
		}
		return e
	}
	e := epoch()
	f := filepath.Join(sub, "f")
	for _, step := range []struct {
		name   string
		do     func() error
		change bool
	}{
		{"nothing", func() error { return nil }, false},
		{"create", func() error { return os.WriteFile(f, []byte("x"), 0o600) }, true},
		{"write", func() error { return os.WriteFile(f, []byte("y"), 0o600) }, false},
		{"rename over", func() error {
			if err := os.WriteFile(f+".tmp", nil, 0o600); err != nil {
				return err
			}
			epoch()
			return os.Rename(f+".tmp", f)
		}, true},
		{"remove", func() error { return os.Remove(f) }, true},
	} {
		if step.change {
			e = epoch()
		}
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		if got := epoch(); (got != e) != step.change {
			t.Fatalf("%s: epoch %d after %d, want it moved: %v", step.name, got, e, step.change)
		}
		e = epoch()
	}
}

// TestEpochMovesOnItsOwn: with no event the epoch still moves on once per
// refresh period, so a Check stats at least that often (a mount over a
// path raises no inotify event).
func TestEpochMovesOnItsOwn(t *testing.T) {
	l, _, _, _ := watchedLock(t)
	e1, _ := l.Epoch()
	defer dirlock.SetRefresh(20 * time.Millisecond)()
	time.Sleep(30 * time.Millisecond) // the period set before is an hour
	e2, _ := l.Epoch()
	time.Sleep(30 * time.Millisecond)
	e3, ok := l.Epoch()
	if !ok || e2 == e1 && e3 == e2 {
		t.Fatalf("epochs %d, %d, %d (ok %v) over 60 ms with a 20 ms period: want it moved", e1, e2, e3, ok)
	}
}

// TestNoWatchThroughASymlink: a lock taken through a path with a symbolic
// link in it stats every time (a link changed raises no event on what it
// points to), and still works.
func TestNoWatchThroughASymlink(t *testing.T) {
	ws := t.TempDir()
	mkdirs(t, filepath.Join(ws, "real", "d"))
	if err := os.Symlink(filepath.Join(ws, "real"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, filepath.Join(ws, "link", "d"))
	if err := l.Watch(); err == nil {
		t.Fatal("Watch of a path through a symbolic link succeeded")
	}
	if l.Watching() == nil {
		t.Fatal("a lock taken through a symbolic link has a watch")
	}
	if _, ok := l.Epoch(); ok {
		t.Fatal("a lock with no watch gives an epoch")
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	rename(t, filepath.Join(ws, "real"), filepath.Join(ws, "real.old"))
	mkdirs(t, filepath.Join(ws, "real", "d"))
	if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
		t.Fatalf("check after the directory behind the link was replaced: %v, want lost", err)
	}
}
