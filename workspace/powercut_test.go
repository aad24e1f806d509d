package workspace

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/internal/vfs/crashfs"
)

// The manifest store's power-cut tests, as fsstore's (see
// fsstore/powercut_test.go): cut the power before every sync of a
// workload, reopen each image with the real file system, and require
// every acknowledged manifest, byte for byte, under the same store id;
// then remove each sync in turn and require some cut to fail.

// msWorld describes a manifest store: every manifest, and its id when
// it had one on disk before it was opened (hadID): a store opened
// without one takes a new random id, which no ref names yet.
func msWorld(ms *manifestStore, hadID bool) (crashfs.World, error) {
	w := crashfs.World{}
	if hadID {
		w["store id"] = ms.id
	}
	for seq := uint64(1); seq <= ms.last; seq++ {
		m, err := ms.load(seq)
		if err != nil {
			return nil, fmt.Errorf("load manifest %d: %w", seq, err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		var b []byte
		for _, k := range keys {
			b = appendOp(b, mop{path: k, rec: m[k]})
		}
		w[fmt.Sprint("manifest ", seq)] = string(b)
	}
	return w, nil
}

func msRead(img string) (crashfs.World, error) {
	_, err := os.Stat(filepath.Join(layout.Manifests(img), "STORE"))
	ms, oerr := openManifestStore(vfs.OS, layout.Manifests(img), hclog.NewNullLogger())
	if oerr != nil {
		return nil, oerr
	}
	defer ms.close()
	return msWorld(ms, err == nil)
}

func msOps(seq, n int) []mop {
	ops := make([]mop, 0, n)
	for i := range n {
		var h [32]byte
		h[0], h[1] = byte(seq), byte(i)
		ops = append(ops, mop{path: fmt.Sprintf("dir/file-%d-%d.go", seq%3, i), rec: mrec{size: int64(seq*100 + i), mtime: int64(seq), mode: 0o644, hash: h}})
	}
	if seq%4 == 0 {
		ops = append(ops, mop{del: true, path: fmt.Sprintf("dir/file-%d-0.go", (seq+1)%3)})
	}
	return ops
}

func runManifestPowerCut(t *testing.T, disabled string, randomCuts int, stopAtFirst bool) (sites, failures []string, cuts int) {
	t.Helper()
	old := rebaseMinOps
	rebaseMinOps = 3
	t.Cleanup(func() { rebaseMinOps = old })

	root := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(layout.StateDir(root), 0o700); err != nil {
		t.Fatal(err)
	}
	cfs, err := crashfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	cfs.Disable(disabled)
	dir := layout.Manifests(root)
	var ms *manifestStore
	var rec *crashfs.Recorder
	live := func() (crashfs.World, error) {
		_, err := os.Stat(filepath.Join(dir, "STORE"))
		if ms == nil {
			w := rec.Cur()
			if err != nil {
				delete(w, "store id")
			}
			return w, nil
		}
		return msWorld(ms, err == nil)
	}
	rec = crashfs.NewRecorder(cfs, t.TempDir(), 14, msRead, live)
	rec.RandomCuts, rec.StopAtFirst = randomCuts, stopAtFirst
	step := func(name string, fn func() error) {
		t.Helper()
		if err := rec.Op(name, fn); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	open := func() error {
		var err error
		ms, err = openManifestStore(cfs, dir, hclog.NewNullLogger())
		return err
	}
	record := func(seq, n int) {
		t.Helper()
		step(fmt.Sprint("record ", seq), func() error {
			_, err := ms.record(msOps(seq, n), 12, nil)
			return err
		})
	}
	step("open a new manifest store", open)
	record(1, 1)
	record(2, 1)
	record(3, 2) // the log holds 4 ops: a new base and log after it
	record(4, 5) // large: written as a base of its own
	record(5, 1)
	step("close, delete STORE", func() error {
		err := ms.close()
		ms = nil
		if err == nil {
			err = cfs.Remove(filepath.Join(dir, "STORE"))
		}
		if err == nil {
			err = cfs.SyncDir(dir)
		}
		return err
	})
	// Reopened without its id, the store takes a new one: manifests
	// recorded from then on name it, so it must be durable.
	step("reopen", open)
	record(6, 1)
	rec.Final()
	if err := ms.close(); err != nil {
		t.Fatal(err)
	}
	sites, failures, cuts = cfs.Sites(), rec.Failures(), rec.Cuts
	if stopAtFirst && len(failures) > 0 {
		return sites, failures, cuts
	}

	// Phase two: a store whose log is in the legacy framing, which Open
	// rewrites in place, then a manifest appended to the rewritten log.
	root = filepath.Join(t.TempDir(), "legacy")
	dir = layout.Manifests(root)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	frame := encodeDelta(1, msOps(1, 1))
	body := frame[recordlog.HeaderSize-1:] // kind and payload
	legacy := []byte(legacyLogMagic)
	legacy = binary.LittleEndian.AppendUint32(legacy, uint32(len(body)))
	legacy = binary.LittleEndian.AppendUint32(legacy, crc32.Checksum(body, castagnoli))
	legacy = append(legacy, body...)
	if err := os.WriteFile(filepath.Join(dir, "log-0000000000000000.bin"), legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "STORE"), []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.CopyFS(probe, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	before, err := msRead(probe)
	if err != nil || before["manifest 1"] == "" {
		t.Fatalf("the legacy store reads as %v, %v", before, err)
	}
	if cfs, err = crashfs.New(root); err != nil {
		t.Fatal(err)
	}
	cfs.Disable(disabled)
	rec = crashfs.NewRecorder(cfs, t.TempDir(), 15, msRead, live)
	rec.RandomCuts, rec.StopAtFirst = randomCuts, stopAtFirst
	rec.SetCur(before)
	step("open, upgrading the legacy log", open)
	record(2, 1)
	rec.Final()
	if err := ms.close(); err != nil {
		t.Fatal(err)
	}
	for _, site := range cfs.Sites() {
		if !slices.Contains(sites, site) {
			sites = append(sites, site)
		}
	}
	return sites, append(failures, rec.Failures()...), cuts + rec.Cuts
}

func TestManifestPowerCut(t *testing.T) {
	crashfs.Check(t, runManifestPowerCut)
}

func TestManifestPowerCutMutation(t *testing.T) {
	crashfs.Mutate(t, runManifestPowerCut)
}
