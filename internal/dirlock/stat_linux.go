//go:build linux && (amd64 || arm64)

package dirlock

import (
	"syscall"
	"unsafe"
)

// statAt stats t's name relative to its directory descriptor (fstatat,
// following a final symbolic link as stat does), from the name's bytes
// made once: no path is copied, nothing allocated.
func statAt(t *target, st *syscall.Stat_t) error {
	for {
		_, _, e := syscall.Syscall6(sysFstatat, uintptr(t.at), uintptr(unsafe.Pointer(t.name)), uintptr(unsafe.Pointer(st)), 0, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return e
	}
}

// atFdcwd is AT_FDCWD: a target's name relative to the working
// directory, as a path given to stat is.
const atFdcwd = -100
