package vfs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/vfs"
)

// create makes the file path and returns it open, with its Stat.
func create(t *testing.T, path string) (vfs.File, os.FileInfo) {
	t.Helper()
	f, err := vfs.OS.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return f, fi
}

// TestSameFileAt checks SameFileAt against os.SameFile of an lstat: the
// open file's own path, a path replaced by another file, a symbolic link
// to the file (not followed), and a removed path (an error).
func TestSameFileAt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	_, fi := create(t, path)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		want bool
	}{
		{"its own path", path, true},
		{"another file", other, false},
		{"a symbolic link to it", link, false},
		{"a directory", dir, false},
	} {
		got, err := vfs.SameFileAt(vfs.OS, tc.path, fi)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pi, err := os.Lstat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want || got != os.SameFile(fi, pi) {
			t.Errorf("%s: SameFileAt = %v, want %v (os.SameFile of an lstat: %v)", tc.name, got, tc.want, os.SameFile(fi, pi))
		}
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if same, err := vfs.SameFileAt(vfs.OS, path, fi); err != nil || same {
		t.Errorf("path replaced by another file: SameFileAt = %v, %v; want false, nil", same, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if same, err := vfs.SameFileAt(vfs.OS, path, fi); err == nil || same {
		t.Errorf("removed path: SameFileAt = %v, %v; want false and an error", same, err)
	}
}

// mtimeMovesAfterQuery writes to f once after a stat of its path (which
// asks for its times), notes the time, then calls between and writes four
// more times, and reports whether the file's mtime moved past the noted
// time: whether one of the last four writes changed the inode.
func mtimeMovesAfterQuery(t *testing.T, f vfs.File, path string, between func()) bool {
	t.Helper()
	buf := []byte("0123456789abcdef")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	noted := time.Now()
	for i := 1; i <= 4; i++ {
		between()
		if _, err := f.WriteAt(buf, int64(i*len(buf))); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime().After(noted)
}

// TestSameFileAtLeavesTimesAlone checks that SameFileAt does not ask for
// the file's times, so that, with multigrain timestamps (Linux 6.13 and
// later), the writes after it keep the mtime the first write gave the
// file rather than each giving it a new fine-grained one (an inode change,
// which a log's fdatasync would write out). A write may still move a
// coarse mtime at a clock tick, so five tries are allowed. An lstat
// between the writes, the control, moves it at every write on such a
// kernel; on a kernel with coarse mtimes only, the test cannot tell and
// says so.
func TestSameFileAtLeavesTimesAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, fi := create(t, path)
	lstat := func() {
		if _, err := os.Lstat(path); err != nil {
			t.Fatal(err)
		}
	}
	if !mtimeMovesAfterQuery(t, f, path, lstat) {
		t.Log("an lstat between writes left the mtime alone: this kernel gives coarse mtimes only, where SameFileAt and lstat do the same")
	}
	sameFileAt := func() {
		if same, err := vfs.SameFileAt(vfs.OS, path, fi); err != nil || !same {
			t.Fatalf("SameFileAt of the open file's path = %v, %v", same, err)
		}
	}
	for try := 1; try <= 5; try++ {
		if !mtimeMovesAfterQuery(t, f, path, sameFileAt) {
			return
		}
	}
	t.Fatal("the mtime moved after SameFileAt in five tries of five: it asks for the file's times, and each write after it changes the inode")
}
