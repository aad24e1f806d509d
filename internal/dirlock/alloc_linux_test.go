//go:build linux && (amd64 || arm64)

package dirlock_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/internal/dirlock"
)

// TestCheckAllocatesNothing checks that a Check, which runs after every
// acknowledged write, copies no path (the names it stats are made once)
// and allocates nothing to read its watch: stating every time (no watch),
// skipping the stats (a watch, nothing changed), and reading the watch and
// then stating (a watch whose epoch moves at every read).
func TestCheckAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
		every bool
	}{{"no watch", false, false}, {"watch, quiet", true, false}, {"watch, epoch moving", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.every {
				t.Cleanup(dirlock.SetRefresh(0))
			}
			dir := t.TempDir()
			sub := filepath.Join(dir, "sub")
			if err := os.Mkdir(sub, 0o700); err != nil {
				t.Fatal(err)
			}
			l := acquire(t, dir)
			if tc.watch {
				if err := l.Watch(); err != nil {
					t.Fatal(err)
				}
			}
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
		})
	}
}
