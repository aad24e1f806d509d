package recordlog_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
)

// atime is the access time of the file at path.
func atime(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return time.Unix(st.Atim.Unix())
}

// TestReadsLeaveAtimeAlone checks that a log, whether opened or created,
// is read without moving its atime (O_NOATIME): under relatime a read
// after a write would, and the next commit's fdatasync would then write
// the inode out with the data. The atime is set a year back, which any
// read through a descriptor without O_NOATIME moves (relatime's day rule)
// unless the file system is mounted noatime.
func TestReadsLeaveAtimeAlone(t *testing.T) {
	dir := t.TempDir()
	created := filepath.Join(dir, "created")
	cl, err := recordlog.CreateFS(vfs.OS, created, []byte("created log content"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	opened := filepath.Join(dir, "opened")
	if err := os.WriteFile(opened, []byte("opened log content"), 0o600); err != nil {
		t.Fatal(err)
	}
	ol, _, err := recordlog.OpenFS(vfs.OS, opened)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ol.Close() })
	old := time.Now().Add(-365 * 24 * time.Hour).Truncate(time.Second)
	for _, l := range []*recordlog.File{cl, ol} {
		if err := os.Chtimes(l.Path(), old, time.Now()); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := l.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		if got := atime(t, l.Path()); !got.Equal(old) {
			t.Errorf("%s: a read moved the atime from %v to %v", filepath.Base(l.Path()), old, got)
		}
	}
}
