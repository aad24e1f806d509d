//go:build linux && (amd64 || arm64 || 386 || arm || riscv64 || loong64 || s390x)

package daemon

import (
	"syscall"
	"unsafe"
)

// fionread is FIONREAD (SIOCINQ) on these architectures; the syscall
// package does not define it.
const fionread = 0x541B

// pendingInput reports whether bytes wait unread in the socket's receive
// queue (FIONREAD). ok is false when that cannot be told.
func pendingInput(raw syscall.RawConn) (pending, ok bool) {
	var n int32
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		// FIONREAD never blocks: no need to tell the scheduler.
		_, _, errno = syscall.RawSyscall(syscall.SYS_IOCTL, fd, fionread, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return false, false
	}
	return n > 0, true
}
