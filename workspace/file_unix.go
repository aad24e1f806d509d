//go:build linux || darwin

package workspace

import (
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/dirlock"
	"github.com/cairn-dev/cairn/internal/layout"
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

// lockDir takes the writer lock of the manifest store in dir
// (internal/dirlock): a flock on dir itself and on its LOCK file, so
// deleting LOCK does not let a second tracker in. Another holder is
// ErrLocked.
func lockDir(dir string, log hclog.Logger) (*dirlock.Lock, error) {
	l, err := dirlock.Acquire(dir, layout.LockName, log)
	if errors.Is(err, dirlock.ErrHeld) {
		return nil, fmt.Errorf("%w: %w", err, ErrLocked)
	}
	return l, err
}

// checkLock fails once the manifest store's lock is lost: dir was renamed
// or removed and another made in its place, where another tracker could
// lock it. Every write checks it first; an append checks again after its
// sync, before the manifest is used.
func (ms *manifestStore) checkLock() error {
	if err := ms.lock.Check(); err != nil {
		return fmt.Errorf("manifests: %w", err)
	}
	return nil
}
