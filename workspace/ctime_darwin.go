package workspace

import (
	"io/fs"
	"syscall"
)

// ctimeOf returns fi's inode change time in nanoseconds, 0 when unknown.
func ctimeOf(fi fs.FileInfo) int64 {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		return sys.Ctimespec.Sec*1e9 + sys.Ctimespec.Nsec
	}
	return 0
}
