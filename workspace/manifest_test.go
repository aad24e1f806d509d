package workspace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestDriftAcrossRestart records a manifest, closes the tracker (the daemon
// goes down), changes files while nothing watches, reopens, and checks that
// Diff(ref, nil) names exactly those changes, and not a file that was only
// touched.
func TestDriftAcrossRestart(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"keep.txt", "edit.txt", "drop.txt", "touch.txt", "dir/deep.txt"} {
		testkit.WriteFile(t, root, f, "original "+f)
	}
	tr, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if ref.ID == "" || ref.Entries != 5 || ref.Clock == "" {
		t.Fatalf("ref = %+v", ref)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}

	testkit.WriteFile(t, root, "edit.txt", "edited while the daemon was down")
	os.Remove(filepath.Join(root, "drop.txt"))
	testkit.WriteFile(t, root, "dir/new.txt", "new")
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(root, "touch.txt"), later, later) // same content

	tr = openT(t, root, Options{})
	d, err := tr.Diff(testkit.Context(t), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, []string{"dir/new.txt"}, []string{"edit.txt"}, []string{"drop.txt"})

	// The clock in the old ref belongs to the old instance.
	if cs := changesT(t, tr, ref.Clock); !cs.FreshInstance {
		t.Fatalf("changes since a clock from before the restart: %+v, want fresh instance", cs)
	}
	// A manifest recorded now diffs against the old one the same way.
	ref2, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	d, err = tr.Diff(testkit.Context(t), ref, &ref2)
	if err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, []string{"dir/new.txt"}, []string{"edit.txt"}, []string{"drop.txt"})
}

// TestAttribution is run attribution: a manifest at the last checkpoint,
// then a tool call writes two files; Diff names exactly those two, both
// "now" and against a manifest recorded at the end of the run.
func TestAttribution(t *testing.T) {
	root := t.TempDir()
	for i := range 50 {
		testkit.WriteFile(t, root, fmt.Sprintf("pkg%d/file%d.go", i%5, i), fmt.Sprint("package p", i))
	}
	tr := openT(t, root, Options{})
	checkpoint, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, root, "pkg1/file1.go", "package p // rewritten by the tool call")
	testkit.WriteFile(t, root, "pkg3/generated.go", "package p // created by the tool call")
	d, err := tr.Diff(testkit.Context(t), checkpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, []string{"pkg3/generated.go"}, []string{"pkg1/file1.go"}, nil)
	end, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if end.ID == checkpoint.ID || end.Entries != 51 {
		t.Fatalf("end ref = %+v (checkpoint %+v)", end, checkpoint)
	}
	if d, err = tr.Diff(testkit.Context(t), checkpoint, &end); err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, []string{"pkg3/generated.go"}, []string{"pkg1/file1.go"}, nil)
	// Nothing changed since: the same manifest id comes back, nothing written.
	again, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != end.ID {
		t.Fatalf("unchanged tree recorded a new manifest: %s after %s", again.ID, end.ID)
	}
}

// TestManifestDeltas records many manifests with small changes over a tree
// and checks that storage grows with the changes, not with tree x count,
// that every manifest loads back exactly, and that a large change starts a
// new base without breaking older references.
func TestManifestDeltas(t *testing.T) {
	old := rebaseMinOps
	rebaseMinOps = 256
	t.Cleanup(func() { rebaseMinOps = old })
	root := t.TempDir()
	const files = 1000
	model := map[string]string{} // what the tree holds, kept beside it
	write := func(rel, content string) {
		testkit.WriteFile(t, root, rel, content)
		model[rel] = content
	}
	for i := range files {
		write(fmt.Sprintf("d%02d/f%04d", i%50, i), fmt.Sprint(i))
	}
	tr := openT(t, root, Options{})
	ctx := testkit.Context(t)
	var refs []session.ManifestRef
	var states []map[string]string
	for i := range 100 {
		write(fmt.Sprintf("d%02d/f%04d", i*7%files%50, i*7%files), fmt.Sprint("v", i))
		ref, err := tr.RecordManifest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
		states = append(states, maps.Clone(model))
	}
	if got := freshHashes(t, root); !maps.Equal(got, model) {
		t.Fatal("test model out of step with the tree")
	}
	logSize := dirSize(t, filepath.Join(root, ".cairn", "manifests"))
	// One full manifest of 1,000 entries is ~75 KB; 100 copies would be 7.5 MB.
	if logSize > 200<<10 {
		t.Fatalf("manifest storage = %d bytes for 100 manifests of %d files; deltas expected", logSize, files)
	}
	bases := func() int {
		tr.mmu.Lock()
		defer tr.mmu.Unlock()
		return len(tr.ms.bases)
	}
	// Medium deltas accumulate in the log until it holds a quarter of the
	// tree, then a base is written from the log.
	for i := range 5 {
		for j := range 60 {
			write(fmt.Sprintf("m%d/h%02d", i, j), "m")
		}
		ref, err := tr.RecordManifest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
		states = append(states, maps.Clone(model))
	}
	if n := bases(); n != 3 { // the first manifest (1,000 puts) was a base too
		t.Fatalf("bases = %d after the medium deltas, want 3", n)
	}
	// One delta as large as a quarter of the tree is written as a base.
	for i := range 300 {
		write(fmt.Sprintf("d%02d/f%04d", i%50, i), fmt.Sprint("big ", i))
	}
	for i := range 200 {
		write(fmt.Sprintf("n%02d/g%04d", i%10, i), "g")
	}
	big, err := tr.RecordManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := bases(); n != 4 {
		t.Fatalf("bases = %d after a large delta, want 4", n)
	}
	refs = append(refs, big)
	states = append(states, maps.Clone(model))
	model["d00/f0000"] = "after the rebase"
	small := writeAndRecord(t, tr, root, "d00/f0000", "after the rebase")
	refs = append(refs, small)
	states = append(states, maps.Clone(model))
	last := len(refs) - 1
	for _, i := range []int{0, 1, 50, 99, 100, 102, 104, last - 1, last} {
		for _, j := range []int{0, 37, 99, 101, 103, 104, last - 1, last} {
			d, err := tr.Diff(ctx, refs[i], &refs[j])
			if err != nil {
				t.Fatalf("Diff(%d, %d): %v", i, j, err)
			}
			a, m, del := diffStates(states[i], states[j])
			wantDiff(t, d, a, m, del)
		}
	}
}

func writeAndRecord(t *testing.T, tr *Tracker, root, rel, content string) session.ManifestRef {
	t.Helper()
	testkit.WriteFile(t, root, rel, content)
	ref, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// freshHashes reads every file's content (small test files) keyed by path.
func freshHashes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p := range freshScan(t, root) {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

func diffStates(from, to map[string]string) (added, modified, deleted []string) {
	for p, v := range to {
		if w, ok := from[p]; !ok {
			added = append(added, p)
		} else if w != v {
			modified = append(modified, p)
		}
	}
	for p := range from {
		if _, ok := to[p]; !ok {
			deleted = append(deleted, p)
		}
	}
	sortStrings(added)
	sortStrings(modified)
	sortStrings(deleted)
	return
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		fi, err := de.Info()
		if err == nil {
			n += fi.Size()
		}
	}
	return n
}

// twoManifests records the manifests of a workspace holding a, then a and
// b, closes the tracker and returns the workspace, both references and the
// manifest log that holds them.
func twoManifests(t *testing.T) (root string, r1, r2 session.ManifestRef, logPath string) {
	t.Helper()
	root = t.TempDir()
	testkit.WriteFile(t, root, "a", "1")
	tr, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r1, err = tr.RecordManifest(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	r2 = writeAndRecord(t, tr, root, "b", "2")
	tr.Close()
	return root, r1, r2, filepath.Join(root, ".cairn", "manifests", fmt.Sprintf("log-%016x.bin", 0))
}

// TestManifestTornTail appends half a frame, as a crash mid-append would
// leave, and checks Open trims it and every acknowledged manifest loads.
func TestManifestTornTail(t *testing.T) {
	root, r1, r2, logPath := twoManifests(t)
	before, _ := os.Stat(logPath)
	frame := encodeDelta(3, []mop{{path: "c"}})
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(frame[:len(frame)-5])
	f.Close()

	tr := openT(t, root, Options{})
	if after, _ := os.Stat(logPath); after.Size() != before.Size() {
		t.Fatalf("log size %d after reopen, want the torn tail trimmed to %d", after.Size(), before.Size())
	}
	d, err := tr.Diff(testkit.Context(t), r1, &r2)
	if err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, []string{"b"}, nil, nil)
	r3 := writeAndRecord(t, tr, root, "c", "3")
	if d, err = tr.Diff(testkit.Context(t), r2, &r3); err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, []string{"c"}, nil, nil)
}

// TestManifestLegacyLogUpgrade writes a log in the framing manifests used
// before internal/recordlog (the length counted the kind byte) and checks
// Open rewrites it, keeping every manifest and trimming a torn tail.
func TestManifestLegacyLogUpgrade(t *testing.T) {
	root, r1, r2, logPath := twoManifests(t)
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	legacy := []byte(legacyLogMagic)
	recordlog.Scan(data, int64(len(logMagic)), func(r recordlog.Record) bool {
		body := append([]byte{r.Kind}, r.Payload...)
		legacy = binary.LittleEndian.AppendUint32(legacy, uint32(len(body)))
		legacy = binary.LittleEndian.AppendUint32(legacy, crc32.Checksum(body, castagnoli))
		legacy = append(legacy, body...)
		return true
	})
	legacy = append(legacy, 9, 0, 0) // a torn tail
	if err := os.WriteFile(logPath, legacy, 0o600); err != nil {
		t.Fatal(err)
	}

	tr := openT(t, root, Options{})
	if got, _ := os.ReadFile(logPath); string(got) != string(data) {
		t.Fatalf("upgraded log differs from the current framing:\n%q\n%q", got, data)
	}
	d, err := tr.Diff(testkit.Context(t), r1, &r2)
	if err != nil {
		t.Fatal(err)
	}
	wantDiff(t, d, []string{"b"}, nil, nil)
}

// TestManifestRefErrors covers empty, foreign and future references.
func TestManifestRefErrors(t *testing.T) {
	root := t.TempDir()
	tr := openT(t, root, Options{})
	ref, err := tr.RecordManifest(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ref  session.ManifestRef
		want error
	}{
		{"empty", session.ManifestRef{}, ErrNoManifest},
		{"foreign store", session.ManifestRef{ID: "0123456789abcdef:1"}, ErrManifestNotFound},
		{"future", session.ManifestRef{ID: ref.ID + "99"}, ErrManifestNotFound},
		{"garbage", session.ManifestRef{ID: "../x"}, ErrManifestNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tr.Diff(testkit.Context(t), tc.ref, nil); !errors.Is(err, tc.want) {
				t.Fatalf("Diff(%q) = %v, want %v", tc.ref.ID, err, tc.want)
			}
		})
	}
	if _, err := Open(root, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
}

// TestClocks covers Changes with empty, foreign, malformed and current
// clocks, and a path deleted then recreated.
func TestClocks(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "a", "1")
	testkit.WriteFile(t, root, "b", "1")
	tr := openT(t, root, Options{})
	cs := changesT(t, tr, "")
	if !cs.FreshInstance || !eqList(cs.Added, []string{"a", "b"}) {
		t.Fatalf("changes since \"\" = %+v", cs)
	}
	if cs := changesT(t, tr, "c:0000000000000000:1"); !cs.FreshInstance {
		t.Fatalf("foreign clock: %+v", cs)
	}
	if _, err := tr.Changes(testkit.Context(t), "yesterday"); !errors.Is(err, ErrBadClock) {
		t.Fatalf("malformed clock: %v", err)
	}
	c1 := cs.Clock
	wantChanges(t, changesT(t, tr, c1), nil, nil, nil)
	os.Remove(filepath.Join(root, "a"))
	c2 := changesT(t, tr, c1).Clock
	testkit.WriteFile(t, root, "a", "2")
	testkit.WriteFile(t, root, "tmp", "x")
	os.Remove(filepath.Join(root, "tmp"))
	wantChanges(t, changesT(t, tr, c1), nil, []string{"a"}, nil)
	wantChanges(t, changesT(t, tr, c2), []string{"a"}, nil, nil)
}
