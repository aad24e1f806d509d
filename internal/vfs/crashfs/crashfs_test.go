package crashfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/internal/vfs/crashfs"
)

func newFS(t *testing.T) (*crashfs.FS, string) {
	t.Helper()
	root := t.TempDir()
	c, err := crashfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return c, root
}

// cut returns the image's files (path relative to the image -> content).
func cut(t *testing.T, c *crashfs.FS, mode crashfs.Mode, rng *rand.Rand) map[string]string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "img")
	if err := c.Cut(dst, mode, rng); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	err := filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(dst, p)
		if fi.IsDir() {
			out[r+"/"] = ""
			return nil
		}
		data, err := os.ReadFile(p)
		out[r] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func create(t *testing.T, c *crashfs.FS, path string, data string) vfs.File {
	t.Helper()
	f, err := c.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(data), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestNameNeedsDirSyncDataNeedsFileSync(t *testing.T) {
	c, root := newFS(t)
	p := filepath.Join(root, "a")
	f := create(t, c, p, "hello")
	defer f.Close()
	if img := cut(t, c, crashfs.SyncedOnly, nil); len(img) != 1 {
		t.Fatalf("unsynced new file survived: %v", img)
	}
	must(t, c.SyncDir(root))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["a"] != "" || len(img) != 2 {
		t.Fatalf("name synced, data not: %q", img)
	}
	must(t, f.Sync())
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["a"] != "hello" {
		t.Fatalf("both synced: %q", img)
	}
	// The real file is up to date throughout.
	if got, _ := os.ReadFile(p); string(got) != "hello" {
		t.Fatalf("real file %q", got)
	}
}

func TestRandomKeepsWholeDroppedOrTornWrites(t *testing.T) {
	c, root := newFS(t)
	p := filepath.Join(root, "log")
	base := strings.Repeat("b", 100)
	f := create(t, c, p, base)
	defer f.Close()
	must(t, f.Sync())
	must(t, c.SyncDir(root))
	tail := bytes.Repeat([]byte("t"), 2000) // crosses sectors at 512, 1024, 1536, 2048
	if _, err := f.WriteAt(tail, 100); err != nil {
		t.Fatal(err)
	}
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["log"] != base {
		t.Fatalf("synced-only kept unsynced bytes: %d bytes", len(img["log"]))
	}
	seen := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		got := cut(t, c, crashfs.Random, rng)["log"]
		if !strings.HasPrefix(got, base) {
			t.Fatalf("synced prefix lost")
		}
		rest := got[len(base):]
		kept := strings.TrimRight(rest, "\x00")
		zeros := len(rest) - len(kept)
		switch {
		case len(rest) == 0:
			seen["dropped"] = true
		case kept == string(tail):
			seen["whole"] = true
		case strings.Trim(kept, "t") != "" || (len(base)+len(kept))%crashfs.Sector != 0:
			t.Fatalf("tear not at a sector boundary: kept %d", len(kept))
		case zeros > 0:
			if len(rest) != len(tail) {
				t.Fatalf("zeroed tear of the wrong size %d", len(rest))
			}
			seen["torn, zeroed"] = true
		default:
			seen["torn"] = true
		}
	}
	if len(seen) != 4 {
		t.Fatalf("outcomes seen: %v", seen)
	}
	must(t, f.Sync())
	if img := cut(t, c, crashfs.Random, rng); img["log"] != base+string(tail) {
		t.Fatal("synced write not kept")
	}
}

func TestDirectoryOperations(t *testing.T) {
	c, root := newFS(t)
	d := filepath.Join(root, "d")
	must(t, c.Mkdir(d, 0o700))
	old := create(t, c, filepath.Join(d, "f"), "old")
	must(t, old.Sync())
	old.Close()
	must(t, c.SyncDir(d))
	if img := cut(t, c, crashfs.SyncedOnly, nil); len(img) != 1 {
		t.Fatalf("a directory whose parent was not synced survived: %v", img)
	}
	must(t, c.SyncDir(root))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["d/f"] != "old" {
		t.Fatalf("image %q", img)
	}

	// Replace f by rename: the old content until the directory is synced.
	nf := create(t, c, filepath.Join(d, "tmp"), "new")
	must(t, nf.Sync())
	nf.Close()
	must(t, c.Rename(filepath.Join(d, "tmp"), filepath.Join(d, "f")))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["d/f"] != "old" || len(img) != 3 {
		t.Fatalf("unsynced rename: %q", img)
	}
	// A random cut keeps a prefix of the operations: the temp's link
	// alone, or the rename too; never the rename without the link.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		img := cut(t, c, crashfs.Random, rng)
		if img["d/f"] != "old" && img["d/f"] != "new" {
			t.Fatalf("random cut: %q", img)
		}
	}
	must(t, c.SyncDir(d))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["d/f"] != "new" || len(img) != 3 {
		t.Fatalf("synced rename: %q", img)
	}

	// A remove comes back until the directory is synced.
	must(t, c.Remove(filepath.Join(d, "f")))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["d/f"] != "new" {
		t.Fatalf("unsynced remove: %q", img)
	}
	must(t, c.SyncDir(d))
	if img := cut(t, c, crashfs.SyncedOnly, nil); len(img) != 2 {
		t.Fatalf("synced remove: %q", img)
	}
}

func TestTruncate(t *testing.T) {
	c, root := newFS(t)
	f := create(t, c, filepath.Join(root, "f"), "0123456789")
	defer f.Close()
	must(t, f.Sync())
	must(t, c.SyncDir(root))
	must(t, f.Truncate(4))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["f"] != "0123456789" {
		t.Fatalf("unsynced truncate: %q", img["f"])
	}
	if _, err := f.WriteAt([]byte("xy"), 4); err != nil {
		t.Fatal(err)
	}
	must(t, f.Sync())
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["f"] != "0123xy" {
		t.Fatalf("a sync makes the truncate durable with the write: %q", img["f"])
	}
}

// TestSitesAndDisable checks that each sync call site is told apart, also
// inside the atomicfile helpers, and that a disabled one is a no-op.
func TestSitesAndDisable(t *testing.T) {
	c, root := newFS(t)
	must(t, atomicfile.WriteFileFS(c, filepath.Join(root, "a"), []byte("A"), 0o600))
	sites := c.Sites()
	if len(sites) != 2 || !strings.Contains(sites[0], "atomicfile.(*Temp).Sync") || !strings.Contains(sites[1], "atomicfile.(*Temp).commit") {
		t.Fatalf("sites of WriteFileFS: %q", sites)
	}
	c.Disable(sites[1])
	must(t, atomicfile.WriteFileFS(c, filepath.Join(root, "b"), []byte("B"), 0o600))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["a"] != "A" || len(img) != 2 {
		t.Fatalf("with the directory sync disabled: %q", img)
	}
	c.Disable("")
	var hooked []string
	c.OnSync(func(site string) { hooked = append(hooked, site) })
	must(t, c.SyncDir(root))
	if img := cut(t, c, crashfs.SyncedOnly, nil); img["b"] != "B" {
		t.Fatalf("re-enabled: %q", img)
	}
	if len(hooked) != 1 || hooked[0] != "(test code)" {
		t.Fatalf("hook saw %q", hooked)
	}
	if _, err := c.OpenFile(filepath.Join(t.TempDir(), "x"), os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		t.Fatal("opened a file outside the root")
	}
}
