//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestManifestDiskFull records manifests on a full 2 MiB tmpfs (root only):
// a delta append and a new base fail with no_space naming their manifest
// file and leave no temp file; once space is freed the same tracker
// records again.
func TestManifestDiskFull(t *testing.T) {
	dir, err := testkit.MountTmpfs(t, "2m")
	if err != nil {
		t.Skipf("cannot mount a tmpfs (%v); TestDiskFull in fsstore covers the classification under RLIMIT_FSIZE", err)
	}
	old := rebaseMinOps
	rebaseMinOps = 256 // so editing every file writes a new base
	t.Cleanup(func() { rebaseMinOps = old })
	root := filepath.Join(dir, "ws")
	long := strings.Repeat("n", 200)
	for i := range 400 {
		testkit.WriteFile(t, root, fmt.Sprintf("d/%s-%03d.txt", long, i), "v1")
	}
	tr := openT(t, root, Options{})
	if _, err := tr.RecordManifest(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	fill := func() { testkit.FillUp(t, filler) }
	manifests := layout.Manifests(root)
	for _, tc := range []struct {
		name  string
		files int // files edited: few append a delta, most write a new base
	}{{"delta", 20}, {"base", 400}} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.files {
				testkit.WriteFile(t, root, fmt.Sprintf("d/%s-%03d.txt", long, i), tc.name)
			}
			fill()
			_, err := tr.RecordManifest(testkit.Context(t))
			if !errors.Is(err, session.ErrNoSpace) || session.CodeOf(err) != session.CodeNoSpace {
				t.Fatalf("RecordManifest on a full disk: %v, want no_space", err)
			}
			if !strings.Contains(err.Error(), "no space left on the device holding "+manifests+"/") || strings.Contains(err.Error(), atomicfile.TempPrefix) {
				t.Errorf("message %q should name a manifest file and no temp file", err)
			}
			t.Log(err)
			filepath.WalkDir(manifests, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
					t.Errorf("temp file left: %s", p)
				}
				return nil
			})
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.RecordManifest(testkit.Context(t)); err != nil {
				t.Fatalf("RecordManifest after space was freed: %v", err)
			}
		})
	}
}
