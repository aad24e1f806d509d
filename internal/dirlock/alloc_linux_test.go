//go:build linux && (amd64 || arm64)

package dirlock_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCheckAllocatesNothing checks that a Check, which runs after every
// acknowledged write, copies no path: the names it stats are made once.
func TestCheckAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, dir)
	if err := l.Pin(sub, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() {
		if err := l.Check(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Check allocates %v times, want 0", n)
	}
}
