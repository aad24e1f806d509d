package testkit

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of the given size ("2m") on a new temp dir and
// unmounts it when the test ends; it fails (as non-root usually does)
// with the mount's error, for the caller to fall back to RLIMIT_FSIZE.
func MountTmpfs(t testing.TB, size string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("cairn-diskfull", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		return "", err
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir, nil
}

// FillUp appends to the file at path until its file system refuses even
// one more byte (ENOSPC), and returns how many bytes it wrote.
func FillUp(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{64 << 10, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the disk: %v", err)
				}
				break
			}
		}
	}
	return n
}
