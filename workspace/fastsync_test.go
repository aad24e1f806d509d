package workspace

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestWriteJustBeforeCommit changes the tree (a new file, an overwrite, a
// file in directories created just now, a rename over a file, a deletion,
// or nothing), waits a random moment from nothing to a few hundred
// microseconds, and records a manifest, 2,000 times: each manifest must
// hold exactly the tree as the writes left it. The short delays land the
// commit while the change's event is queued in the kernel, being read, or
// read but not yet applied; Sync must see each of those as in flight.
func TestWriteJustBeforeCommit(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "seed.txt", "seed")
	tr := openT(t, root, Options{})
	if tr.Status().Mode != ModeWatching {
		t.Skip("inotify unavailable")
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 17))
	t.Logf("seed %d", seed)
	model := map[string][32]byte{"seed.txt": sha256.Sum256([]byte("seed"))}
	dirs := []string{""}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		model[rel] = sha256.Sum256([]byte(content))
	}
	anyFile := func() string {
		names := make([]string, 0, len(model))
		for rel := range model {
			names = append(names, rel)
		}
		slices.Sort(names)
		return names[rng.IntN(len(names))]
	}
	const iterations = 2000
	for i := range iterations {
		var what string
		switch k := rng.IntN(6); {
		case k == 0 || len(model) == 0:
			rel := join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("f%d.txt", i))
			write(rel, fmt.Sprintf("new %d", i))
			what = "create " + rel
		case k == 1:
			rel := anyFile()
			write(rel, fmt.Sprintf("overwritten at %d", i))
			what = "overwrite " + rel
		case k == 2:
			dir := join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("d%d", i))
			if rng.IntN(2) == 0 {
				dir += "/sub/deeper"
			}
			if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(dir)), 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, dir)
			rel := dir + "/in-new-dir.txt"
			write(rel, fmt.Sprintf("in a new directory %d", i))
			what = "mkdir and create " + rel
		case k == 3:
			rel := anyFile()
			tmp := filepath.Join(root, fmt.Sprintf("tmp%d", i))
			content := fmt.Sprintf("renamed over at %d", i)
			if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(root, filepath.FromSlash(rel))); err != nil {
				t.Fatal(err)
			}
			model[rel] = sha256.Sum256([]byte(content))
			what = "rename over " + rel
		case k == 4:
			rel := anyFile()
			if err := os.Remove(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
				t.Fatal(err)
			}
			delete(model, rel)
			what = "delete " + rel
		default:
			what = "nothing"
		}
		switch rng.IntN(4) {
		case 0:
		case 1:
			runtime.Gosched()
		case 2:
			for end := time.Now().Add(time.Duration(rng.IntN(50)) * time.Microsecond); time.Now().Before(end); {
			}
		case 3:
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
		ref, err := tr.RecordManifest(testkit.Context(t))
		if err != nil {
			t.Fatalf("iteration %d (%s): RecordManifest: %v", i, what, err)
		}
		m, err := tr.loadRef(ref.ID)
		if err != nil {
			t.Fatalf("iteration %d: load %s: %v", i, ref.ID, err)
		}
		if diffs := manifestDiffs(m, model); len(diffs) > 0 {
			t.Fatalf("iteration %d (%s, seed %d): the manifest differs from the tree:\n%v", i, what, seed, diffs)
		}
	}
	t.Logf("%d commits, %d needed a cookie", iterations, tr.cookieSyncs.Load())
}

// manifestDiffs lists how m differs from want (path -> content hash).
func manifestDiffs(m map[string]mrec, want map[string][32]byte) []string {
	var diffs []string
	for rel, h := range want {
		r, ok := m[rel]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+rel)
		case r.hash != h:
			diffs = append(diffs, "stale "+rel)
		}
	}
	for rel := range m {
		if _, ok := want[rel]; !ok {
			diffs = append(diffs, "extra "+rel)
		}
	}
	slices.Sort(diffs)
	return diffs
}

// TestUnchangedManifestAllocations bounds what recording the manifest of
// a tree that has not changed since the last one allocates: an agent's
// commit records one every turn, most often over an unchanged tree, and
// the set of paths changed since is kept rather than made anew.
func TestUnchangedManifestAllocations(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "a.txt", "a")
	tr := openT(t, root, Options{})
	if tr.Status().Mode != ModeWatching {
		t.Skip("inotify unavailable")
	}
	ctx := testkit.Context(t)
	first, err := tr.RecordManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		ref, err := tr.RecordManifest(ctx)
		if err != nil || ref.ID != first.ID {
			t.Fatalf("RecordManifest: %+v, %v; want %s", ref, err, first.ID)
		}
	})
	t.Logf("%.1f allocations per manifest of an unchanged tree", allocs)
	if allocs > 5 {
		t.Fatalf("recording the manifest of an unchanged tree made %.1f allocations, want at most 5 (8 when a set was made per manifest)", allocs)
	}
}

// TestRenameOverWithTheSameStat renames a file over another of the same
// size while the index is held, and gives the index's entry the new
// file's stat first: what the index holds when both were written and
// renamed within one tick of the file system's clock (size, mtime and
// ctime all equal; TestWriteJustBeforeCommit met it under load). The
// rename's event is then all that says the path changed, and the next
// manifest must hold the new content.
func TestRenameOverWithTheSameStat(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "f.txt", "version a")
	tr := openT(t, root, Options{})
	if tr.Status().Mode != ModeWatching {
		t.Fatalf("the tracker is not watching (%s): this test is about inotify events", tr.Status().Mode)
	}
	hashIn := func() [32]byte {
		t.Helper()
		ref, err := tr.RecordManifest(testkit.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.loadRef(ref.ID)
		if err != nil {
			t.Fatal(err)
		}
		return m["f.txt"].hash
	}
	if hashIn() != sha256.Sum256([]byte("version a")) {
		t.Fatal("the first manifest does not hold f.txt's content")
	}
	testkit.WriteFile(t, root, "b.tmp", "version b")
	f := filepath.Join(root, "f.txt")
	tr.mu.Lock() // the loop applies no event until the entry holds the new stat
	if err := os.Rename(filepath.Join(root, "b.tmp"), f); err != nil {
		tr.mu.Unlock()
		t.Fatal(err)
	}
	fi, err := os.Lstat(f)
	e := tr.lookupLocked("f.txt")
	if err == nil && e != nil {
		st := statOf(fi)
		e.size, e.mtime, e.ctime, e.mode = st.size, st.mtime, st.ctime, st.mode
	}
	tr.mu.Unlock()
	if err != nil || e == nil {
		t.Fatalf("stat %v, index entry %v", err, e)
	}
	if hashIn() != sha256.Sum256([]byte("version b")) {
		t.Fatal("the manifest after the rename holds f.txt's old content")
	}
}
