//go:build linux || darwin

package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/internal/dirlock"
)

func acquire(t testing.TB, dir string) *dirlock.Lock {
	t.Helper()
	l, err := dirlock.Acquire(dir, "LOCK", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

// TestHeldWithoutLockFile checks that the directory itself is the lock:
// with the lock file deleted, a second Acquire is still refused.
func TestHeldWithoutLockFile(t *testing.T) {
	dir := t.TempDir()
	l := acquire(t, dir)
	if err := os.Remove(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	if l2, err := dirlock.Acquire(dir, "LOCK", nil); !errors.Is(err, dirlock.ErrHeld) {
		if l2 != nil {
			l2.Release()
		}
		t.Fatalf("second acquire: %v, want held", err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("check with the lock file deleted: %v", err)
	}
	var he *dirlock.HeldError
	if _, err := dirlock.Acquire(dir, "LOCK", nil); !errors.As(err, &he) || he.PID != os.Getpid() {
		t.Fatalf("acquire after Check put LOCK back: %v, want held by pid %d", err, os.Getpid())
	}
}

// TestLostForGood replaces a pinned directory: Check fails, and keeps
// failing after the directory is put back.
func TestLostForGood(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, dir)
	if err := l.Pin(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sub, sub+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
		t.Fatalf("check after %s was replaced: %v, want lost", sub, err)
	}
	os.Remove(sub)
	if err := os.Rename(sub+".old", sub); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
		t.Fatalf("check after it came back: %v, want still lost", err)
	}
}

// TestLostWhenDirReplaced renames the locked directory away, contents
// and all, and makes another in its place: Check fails, although every
// name in the directory it locked (the pinned directory, the lock file)
// still names what it did, so a check that looked them up only through
// the directory's descriptor would pass.
func TestLostWhenDirReplaced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		again func(t *testing.T, dir string) // what to put in the new directory
	}{
		{"empty", func(t *testing.T, dir string) {}},
		{"same names", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"its own contents moved in", func(t *testing.T, dir string) {
			// The pinned directory and the lock file themselves, moved
			// into the new directory: only the directory differs.
			for _, n := range []string{"sub", "LOCK"} {
				if err := os.Rename(filepath.Join(dir+".old", n), filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			sub := filepath.Join(dir, "sub")
			for _, d := range []string{dir, sub} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			l := acquire(t, dir)
			if err := l.Pin(sub); err != nil {
				t.Fatal(err)
			}
			if err := l.Check(); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.again(t, dir)
			if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
				t.Fatalf("check after %s was replaced: %v, want lost", dir, err)
			}
		})
	}
}

// TestLostPinOutside: a pinned path outside the locked directory is
// checked by its whole path; replacing it loses the lock.
func TestLostPinOutside(t *testing.T) {
	root := t.TempDir()
	dir, other := filepath.Join(root, "d"), filepath.Join(root, "other")
	for _, d := range []string{dir, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l := acquire(t, dir)
	if err := l.Pin(other); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, other+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
		t.Fatalf("check after %s was replaced: %v, want lost", other, err)
	}
}

// TestLostPinNotAnEntry pins paths that are not entries of the locked
// directory although they end in the name of one (sub): Check walks them
// whole, so each passes while it names what it did, and replacing it
// loses the lock.
func TestLostPinNotAnEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		pin  func(root, dir string) string
	}{
		{"beside it", func(root, dir string) string { return filepath.Join(root, "sub") }},
		{"two deep", func(root, dir string) string { return filepath.Join(dir, "x", "sub") }},
		{"its path and more", func(root, dir string) string { return dir + "sub" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "d")
			for _, d := range []string{dir, filepath.Join(dir, "sub"), filepath.Join(dir, "x"), filepath.Join(dir, "x", "sub"),
				filepath.Join(root, "sub"), dir + "sub"} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			p := tc.pin(root, dir)
			l := acquire(t, dir)
			if err := l.Pin(p); err != nil {
				t.Fatal(err)
			}
			if err := l.Check(); err != nil {
				t.Fatalf("check with %s in place: %v", p, err)
			}
			if err := os.Rename(p, p+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
				t.Fatalf("check after %s was replaced: %v, want lost", p, err)
			}
		})
	}
}

// TestLockFileReplacedByAnotherHolder: a lock file replaced by one another
// open of the directory holds loses the lock.
func TestLockFileReplacedByAnotherHolder(t *testing.T) {
	dir := t.TempDir()
	l := acquire(t, dir)
	replaceLockFile(t, dir)
	if err := l.Check(); !errors.Is(err, dirlock.ErrLost) {
		t.Fatalf("check with LOCK replaced and held elsewhere: %v, want lost", err)
	}
}

// replaceLockFile removes dir's lock file and makes a new one, locked by
// an open of its own (closed when the test ends): another holder's.
func replaceLockFile(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "LOCK")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCheck measures what a write pays per Check with the store's two
// pinned directories; fsstore checks twice per commit.
func BenchmarkCheck(b *testing.B) {
	b.Run("stat", func(b *testing.B) { benchCheck(b, false) })
	b.Run("watch", func(b *testing.B) { benchCheck(b, true) })
}

// benchCheck is BenchmarkCheck with or without the lock's watch (where
// there is none, "watch" stats as "stat" does).
func benchCheck(b *testing.B, watch bool) {
	dir := b.TempDir()
	var subs []string
	for _, n := range []string{"sessions", "workflows"} {
		subs = append(subs, filepath.Join(dir, n))
		if err := os.Mkdir(subs[len(subs)-1], 0o700); err != nil {
			b.Fatal(err)
		}
	}
	l := acquire(b, dir)
	if watch {
		if err := l.Watch(); err != nil {
			b.Log("no watch:", err)
		}
	}
	if err := l.Pin(subs...); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
