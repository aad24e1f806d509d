package daemon

import (
	"net"
	"syscall"
	"unsafe"
)

// socketBuffered reports whether the socket has bytes not read yet
// (FIONREAD, alias TIOCINQ); true when it cannot tell.
func socketBuffered(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return true
	}
	return n > 0
}
