package recordlog_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
)

// statCounter is a vfs.File that counts its Stat calls.
type statCounter struct {
	vfs.File
	stats int
}

func (c *statCounter) Stat() (os.FileInfo, error) {
	c.stats++
	return c.File.Stat()
}

// TestIdentStatsOnce checks that Ident fstats the descriptor once and keeps
// naming the open file after its path names another one.
func TestIdentStatsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.OS.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &statCounter{File: f}
	l := recordlog.Adopt(c, path, 1)
	t.Cleanup(func() { l.Close() })
	first, err := l.Ident()
	if err != nil {
		t.Fatal(err)
	}
	// Another file takes the path: Ident still names the open one.
	other := path + ".new"
	if err := os.WriteFile(other, []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		fi, err := l.Ident()
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(fi, first) {
			t.Fatal("Ident changed while the file stayed open")
		}
	}
	now, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(first, now) {
		t.Fatal("the open file and the file its path names now are the same")
	}
	if c.stats != 1 {
		t.Fatalf("4 Ident calls made %d fstat calls, want 1", c.stats)
	}
}
