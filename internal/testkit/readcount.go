package testkit

import (
	"os"
	"sync/atomic"

	"github.com/cairn-dev/cairn/internal/vfs"
)

// ReadCountFS is a vfs.FS that counts the bytes its files read, in Bytes:
// a test of a read that must cost what it touches opens the store on it.
type ReadCountFS struct {
	vfs.FS
	Bytes *atomic.Int64
}

// NewReadCountFS returns a ReadCountFS over the real file system.
func NewReadCountFS() ReadCountFS { return ReadCountFS{vfs.OS, new(atomic.Int64)} }

// OpenFile opens name as the file system under it does, counting its reads.
func (c ReadCountFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return readCountFile{f, c.Bytes}, nil
}

type readCountFile struct {
	vfs.File
	bytes *atomic.Int64
}

func (f readCountFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.bytes.Add(int64(n))
	return n, err
}

func (f readCountFile) Dup(name string) (vfs.File, error) {
	d, err := f.File.Dup(name)
	if err != nil {
		return nil, err
	}
	return readCountFile{d, f.bytes}, nil
}
