package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openT opens a tracker on root and closes it when the test ends.
func openT(t *testing.T, root string, opts Options) *Tracker {
	t.Helper()
	tr, err := Open(root, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tr
}

func syncT(t *testing.T, tr *Tracker) {
	t.Helper()
	if err := tr.Sync(testkit.Context(t)); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func changesT(t *testing.T, tr *Tracker, since string) api.ChangeSet {
	t.Helper()
	cs, err := tr.Changes(testkit.Context(t), since)
	if err != nil {
		t.Fatalf("Changes(%q): %v", since, err)
	}
	return cs
}

// indexOf dumps the index as path -> "mode size mtime [-> target]".
func indexOf(tr *Tracker) map[string]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string]string{}
	tr.walkLocked(func(rel string, e *entry) {
		out[rel] = describe(e.mode, e.size, e.mtime, tr.links[rel])
	})
	return out
}

func describe(mode fs.FileMode, size, mtime int64, target string) string {
	s := mode.String() + " " + itoa(size) + " " + itoa(mtime)
	if target != "" {
		s += " -> " + target
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// freshScan walks root independently of the tracker, skipping the built-in
// ignored directories, and dumps it like indexOf.
func freshScan(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if slices.Contains(builtinIgnored, d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ = os.Readlink(p)
		}
		out[filepath.ToSlash(rel)] = describe(fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), target)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameIndex reports the differences between the index and a fresh scan.
func sameIndex(t *testing.T, tr *Tracker) {
	t.Helper()
	got, want := indexOf(tr), freshScan(t, tr.Root())
	var diffs []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			diffs = append(diffs, "missing "+p)
		} else if g != w {
			diffs = append(diffs, "stale "+p+": "+g+" want "+w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, "extra "+p)
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 0 {
		if len(diffs) > 20 {
			diffs = append(diffs[:20], "...")
		}
		t.Fatalf("index differs from a fresh scan (%d vs %d paths):\n%s", len(got), len(want), strings.Join(diffs, "\n"))
	}
}

func eqList(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return slices.Equal(a, b)
}

func wantChanges(t *testing.T, cs api.ChangeSet, added, modified, deleted []string) {
	t.Helper()
	if cs.FreshInstance || !eqList(cs.Added, added) || !eqList(cs.Modified, modified) || !eqList(cs.Deleted, deleted) {
		t.Fatalf("changes = fresh:%v added:%q modified:%q deleted:%q\nwant added:%q modified:%q deleted:%q",
			cs.FreshInstance, cs.Added, cs.Modified, cs.Deleted, added, modified, deleted)
	}
}

func wantDiff(t *testing.T, d FileDiff, added, modified, deleted []string) {
	t.Helper()
	if !eqList(d.Added, added) || !eqList(d.Modified, modified) || !eqList(d.Deleted, deleted) {
		t.Fatalf("diff = added:%q modified:%q deleted:%q\nwant added:%q modified:%q deleted:%q",
			d.Added, d.Modified, d.Deleted, added, modified, deleted)
	}
}
