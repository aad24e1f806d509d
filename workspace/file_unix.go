//go:build linux || darwin

package workspace

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/vfs"
)

// tempPrefix starts the name of every temp file; Open removes leftovers.
const tempPrefix = atomicfile.TempPrefix

// ensureDir makes dir a real 0700 directory (atomicfile.EnsureDir); a
// symlink or other file in its place is ErrUnsafePath.
func ensureDir(dir string) error { return ensureDirFS(vfs.OS, dir) }

// ensureDirFS is ensureDir on fsys.
func ensureDirFS(fsys vfs.FS, dir string) error {
	err := atomicfile.EnsureDirFS(fsys, dir)
	if errors.Is(err, atomicfile.ErrNotDir) {
		return fmt.Errorf("%s: %w", dir, ErrUnsafePath)
	}
	return err
}

// lockFile takes an exclusive, non-blocking advisory lock on path for the
// life of the returned file.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|atomicfile.OpenFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}

func unlockFile(f *os.File) error {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}
