package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/internal/dirlock"
	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestManifestLockCannotBeLost deletes .cairn/manifests/LOCK under a
// tracker (a second Open is still refused and the tracker still records),
// then renames the manifests directory away and makes a new one (the
// tracker records nothing more, and says why).
func TestManifestLockCannotBeLost(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "a", "1")
	tr := openT(t, root, Options{})
	if _, err := tr.RecordManifest(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(root, ".cairn", "manifests")
	if err := os.Remove(filepath.Join(mdir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	if tr2, err := Open(root, Options{}); !errors.Is(err, ErrLocked) {
		if tr2 != nil {
			tr2.Close()
		}
		t.Fatalf("second Open with LOCK deleted = %v, want ErrLocked", err)
	}
	testkit.WriteFile(t, root, "a", "2")
	if _, err := tr.RecordManifest(testkit.Context(t)); err != nil {
		t.Fatalf("record with LOCK deleted: %v", err)
	}
	if err := os.Rename(mdir, mdir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mdir, 0o700); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, root, "a", "3")
	if _, err := tr.RecordManifest(testkit.Context(t)); !errors.Is(err, dirlock.ErrLost) {
		t.Fatalf("record after the manifests directory was replaced = %v, want the lock lost", err)
	}
}
