package vfs

import (
	"errors"
	"os"
	"syscall"
)

// SameFileAt reports whether name, not followed if it is a symbolic link,
// still names the file fi describes (fi from a Stat of an open File): the
// check an owner of an open log makes before each append.
//
// On the OS file system it asks the kernel for the file's type, device and
// inode only (statx on Linux), not for its times. An lstat asks for the
// times, and on kernels with multigrain timestamps (Linux 6.13 and later)
// a file whose times were asked for gets a new fine-grained mtime at its
// next write: its inode changes at every commit, where a coarse mtime
// changes once per clock tick, and on ext4 without a journal every
// fdatasync then writes the inode's block as well as the data.
func SameFileAt(fsys FS, name string, fi os.FileInfo) (bool, error) {
	if _, ok := fsys.(osFS); ok {
		if same, ok, err := sameFileNoTimes(name, fi); ok {
			return same, err
		}
	}
	pi, err := fsys.Lstat(name)
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// OpenNoAtime is fsys.OpenFile with O_NOATIME where the platform has it,
// so that reading the file does not change its inode (under relatime a
// read after a write moves the atime, which a log's next fdatasync would
// write out). O_NOATIME is refused (EPERM) to a caller that does not own
// the file; the open is then made without it.
func OpenNoAtime(fsys FS, name string, flag int, perm os.FileMode) (File, error) {
	if noAtime != 0 {
		f, err := fsys.OpenFile(name, flag|noAtime, perm)
		if !errors.Is(err, syscall.EPERM) {
			return f, err
		}
	}
	return fsys.OpenFile(name, flag, perm)
}
