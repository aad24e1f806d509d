// Package vfs is the narrow file-system interface cairn's file stores
// (fsstore, the workspace manifests, and the internal/atomicfile and
// internal/recordlog primitives under them) reach the disk through. OS is
// the real one; tests substitute one that models what a power cut keeps
// (internal/vfs/crashfs). The interface holds only what the stores use;
// the writer locks (flock) stay outside it.
package vfs

import (
	"io"
	"os"
	"syscall"
)

// FS is a file system. Names are paths as the os package takes them.
type FS interface {
	// OpenFile opens name as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	// Link makes newname a second name of oldname's file (link(2)); it
	// fails with an error wrapping fs.ErrExist when newname exists.
	Link(oldname, newname string) error
	Remove(name string) error
	Mkdir(name string, perm os.FileMode) error
	Chmod(name string, mode os.FileMode) error
	Lstat(name string) (os.FileInfo, error)
	Stat(name string) (os.FileInfo, error)
	ReadDir(name string) ([]os.DirEntry, error)
	// SyncDir makes the names created, renamed or removed in dir durable
	// (fsync of the directory).
	SyncDir(dir string) error
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	// Sync makes the file's content and size durable (fdatasync), not its
	// name: that takes a SyncDir of its directory.
	Sync() error
	// Presync is Sync (the same fdatasync) for writes no guarantee relies
	// on being durable: zeros written ahead of a log's end, so that the
	// appends that later overwrite them find the file's size and blocks
	// already on disk and their fdatasync needs no journal commit.
	// crashfs cuts the power at it as at Sync, but its mutation test does
	// not require a cut to fail without it.
	Presync() error
	Stat() (os.FileInfo, error)
	Close() error
	// Name is the name the file was opened (or duplicated) under.
	Name() string
	// Dup returns a second File for the same open file, whose errors name
	// name: a file renamed while open is known by its new name without a
	// new open (which could find another file under that name).
	Dup(name string) (File, error)
}

// OS is the real file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Rename(oldpath, newpath string) error       { return os.Rename(oldpath, newpath) }
func (osFS) Link(oldname, newname string) error         { return os.Link(oldname, newname) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }
func (osFS) Mkdir(name string, perm os.FileMode) error  { return os.Mkdir(name, perm) }
func (osFS) Chmod(name string, mode os.FileMode) error  { return os.Chmod(name, mode) }
func (osFS) Lstat(name string) (os.FileInfo, error)     { return os.Lstat(name) }
func (osFS) Stat(name string) (os.FileInfo, error)      { return os.Stat(name) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// osFile is an *os.File whose Sync is Fdatasync.
type osFile struct{ *os.File }

func (f osFile) Sync() error { return Fdatasync(f.File) }

func (f osFile) Presync() error { return Fdatasync(f.File) }

func (f osFile) Dup(name string) (File, error) {
	g, err := Dup(f.File, name)
	if err != nil {
		return nil, err
	}
	return osFile{g}, nil
}

// Dup returns a duplicate of f's descriptor as a file named name
// (close-on-exec, taken under syscall.ForkLock as os/exec expects).
func Dup(f *os.File, name string) (*os.File, error) {
	syscall.ForkLock.RLock()
	fd, err := syscall.Dup(int(f.Fd()))
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// ReadFile reads the whole file name of fsys, as os.ReadFile does.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, fi.Size())
	n, err := f.ReadAt(data, 0)
	if err == io.EOF && n == len(data) {
		err = nil
	}
	return data[:n], err
}
