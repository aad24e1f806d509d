//go:build linux && (amd64 || arm64)

package vfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/vfs"
)

// TestSameFileAtPathLengths checks SameFileAt's answer for a path that
// fits its buffer on the stack and for one longer (copied to the heap),
// and that the short one, a log's, allocates nothing.
func TestSameFileAtPathLengths(t *testing.T) {
	root := t.TempDir()
	long := filepath.Join(root, strings.Repeat("d", 200), strings.Repeat("e", 200), strings.Repeat("f", 200))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		dir   string
		alloc bool
	}{
		{"short", root, false},
		{"long", long, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tc.dir, "log")
			_, fi := create(t, path)
			if same, err := vfs.SameFileAt(vfs.OS, path, fi); err != nil || !same {
				t.Fatalf("its own path (%d bytes): SameFileAt = %v, %v", len(path), same, err)
			}
			if !tc.alloc {
				if n := testing.AllocsPerRun(20, func() { vfs.SameFileAt(vfs.OS, path, fi) }); n != 0 {
					t.Fatalf("SameFileAt of a %d-byte path allocates %v times, want 0", len(path), n)
				}
			}
			if err := os.WriteFile(path+".new", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
			if same, err := vfs.SameFileAt(vfs.OS, path, fi); err != nil || same {
				t.Fatalf("path replaced (%d bytes): SameFileAt = %v, %v; want false, nil", len(path), same, err)
			}
		})
	}
}
