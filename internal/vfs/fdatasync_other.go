//go:build !linux

package vfs

import "os"

// Fdatasync flushes f's data and metadata. Outside Linux there is no
// portable fdatasync(2), so it is f.Sync, which on darwin is
// fcntl(F_FULLFSYNC): slower than fdatasync, but it reaches the disk, where
// a plain fsync on darwin stops at the drive's cache. Linux is the only
// platform cairn is tested on (README.md).
func Fdatasync(f *os.File) error {
	return f.Sync()
}
