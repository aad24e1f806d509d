// Package atomicfile holds cairn's crash-safe file primitives: WriteFile
// replaces a small file so that, after it returns nil, a crash leaves
// either the old content or the new one, never a mix, and the new name is
// durable (it relies on rename(2) being atomic and fsyncs the directory
// after the rename, a step many implementations skip). SyncDir, Fdatasync,
// EnsureDir, TempName and OpenFlags are the pieces the file store and the
// workspace tracker build their own append-only files from.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// TempPrefix starts the name of every temp file TempName makes, so
// recovery code can recognise and remove leftovers of a crash.
const TempPrefix = ".tmp-"

// OpenFlags are added to every open of a file cairn writes: never through a
// symlink, never inherited by a child process.
const OpenFlags = syscall.O_NOFOLLOW | syscall.O_CLOEXEC

// ErrNotDir is wrapped by EnsureDir's error when something other than a
// directory (a symlink, a file) stands where the directory should be.
var ErrNotDir = errors.New("not a real directory")

// TempName returns a fresh temp file name beside final, starting with
// TempPrefix.
func TempName(final string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(filepath.Dir(final), TempPrefix+filepath.Base(final)+"."+hex.EncodeToString(b[:]))
}

// SyncDir fsyncs a directory so the names created, renamed or removed in it
// are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// EnsureDir makes dir a real 0700 directory: it creates it (and syncs its
// parent) when missing, and restores 0700 when its mode differs. A symlink
// or any other kind of file in its place is an error wrapping ErrNotDir.
func EnsureDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		if err := SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Dir(dir), err)
		}
		fi, err = os.Lstat(dir)
	}
	switch {
	case err != nil:
		return fmt.Errorf("stat %s: %w", dir, err)
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: %w", dir, ErrNotDir)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, ErrNotDir)
	case fi.Mode().Perm() != 0o700:
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("chmod %s: %w", dir, err)
		}
	}
	return nil
}

// WriteFile replaces path with data: a temp file in the same directory
// (O_EXCL, perm), write, fsync, close, rename over path, fsync the
// directory. It refuses to replace a symlink or anything but a regular
// file. On error the temp file is removed and path is left as it was.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("atomicfile: %s is not a regular file (a symlink?); refusing to replace it", path)
	}
	tmp := TempName(path)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|OpenFlags, perm)
	if err != nil {
		return fmt.Errorf("atomicfile: create %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("atomicfile: sync dir of %s: %w", path, err)
	}
	return nil
}
