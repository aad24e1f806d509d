package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestSymlinksNotFollowed checks that symlinks, to directories and files
// outside the workspace or inside it, are recorded as links with their
// target string, are never descended into or watched, and that changes at
// their targets are not reported.
func TestSymlinksNotFollowed(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	testkit.WriteFile(t, outside, "secret/data.txt", "outside")
	testkit.WriteFile(t, root, "in/real.txt", "inside")
	links := map[string]string{
		"out-dir":  filepath.Join(outside, "secret"),
		"out-file": filepath.Join(outside, "secret/data.txt"),
		"rel-up":   "../../..",
		"in-dir":   "in",
		"dangling": "does/not/exist",
		"in/loop":  "../in",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	tr := openT(t, root, Options{})
	for name, target := range links {
		fi, ok := tr.Lookup(name)
		if !ok || fi.Mode&fs.ModeSymlink == 0 || fi.LinkTarget != target {
			t.Errorf("Lookup(%q) = %+v, %v; want a link to %q", name, fi, ok, target)
		}
	}
	for p := range indexOf(tr) {
		for name := range links {
			if len(p) > len(name) && p[:len(name)+1] == name+"/" {
				t.Errorf("indexed %q below the symlink %q", p, name)
			}
		}
	}
	if st := tr.Status(); st.Watches != 3 { // root, in, .cairn
		t.Errorf("watches = %d, want 3 (root, in, .cairn): a symlinked directory was watched", st.Watches)
	}
	sameIndex(t, tr)
	ref, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}

	since := tr.Clock()
	testkit.WriteFile(t, outside, "secret/data.txt", "changed outside")
	testkit.WriteFile(t, outside, "secret/new.txt", "new outside")
	wantChanges(t, changesT(t, tr, since), nil, nil, nil)
	d, err := tr.Diff(testkit.Context(t), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, nil, nil, nil) // a link's content is its target string

	// Retargeting a link is a modification of the link.
	os.Remove(filepath.Join(root, "out-file"))
	os.Symlink("/etc/hostname", filepath.Join(root, "out-file"))
	wantChanges(t, changesT(t, tr, since), nil, []string{"out-file"}, nil)
	if d, err = tr.Diff(testkit.Context(t), ref, nil); err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, nil, []string{"out-file"}, nil)
	if fi, _ := tr.Lookup("out-file"); fi.LinkTarget != "/etc/hostname" {
		t.Errorf("link target = %q", fi.LinkTarget)
	}
}
