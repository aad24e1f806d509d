// Package atomicfile replaces small files crash-safely: after WriteFile
// returns nil, a crash leaves either the old content or the new one, never
// a mix, and the new name is durable. It relies on rename(2) being atomic
// and fsyncs the directory after the rename (a step many implementations
// skip). The file store's logs do not use it: they append, and create their
// files through their own fault-injectable path.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// TempPrefix starts the name of every temp file WriteFile creates, so
// recovery code can recognise and remove leftovers of a crash.
const TempPrefix = ".tmp-"

// WriteFile replaces path with data: a temp file in the same directory
// (O_EXCL, perm), write, fsync, close, rename over path, fsync the
// directory. It refuses to replace a symlink or anything but a regular
// file. On error the temp file is removed and path is left as it was.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("atomicfile: %s is not a regular file (a symlink?); refusing to replace it", path)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, TempPrefix+filepath.Base(path)+"."+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
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
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: sync dir of %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("atomicfile: sync dir of %s: %w", path, err)
	}
	return nil
}
