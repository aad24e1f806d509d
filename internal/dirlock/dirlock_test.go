//go:build linux || darwin

package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
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

// BenchmarkCheck measures what a write pays per Check with the store's two
// pinned directories; fsstore checks twice per commit.
func BenchmarkCheck(b *testing.B) {
	dir := b.TempDir()
	var subs []string
	for _, n := range []string{"sessions", "workflows"} {
		subs = append(subs, filepath.Join(dir, n))
		if err := os.Mkdir(subs[len(subs)-1], 0o700); err != nil {
			b.Fatal(err)
		}
	}
	l := acquire(b, dir)
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
