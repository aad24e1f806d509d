package protocol

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawIO wraps a client's Unix socket so that its reads and writes are
// system calls the Go runtime is not told about (RawSyscall): the socket
// is non-blocking, so neither ever blocks, and a would-block waits in the
// runtime's poller as before (syscall.RawConn), under the socket's
// deadlines. A system call the runtime is told about wakes its monitor
// thread (sysmon) when it sleeps, which it does whenever the process's one
// P is idle: in a libcairn client that is while every call waits for its
// answer, so the reader goroutine's read of each answer woke it, and it
// then polled every 20 µs until the P was idle again; each of those
// wake-ups is a context switch, the costliest part of a client's call
// when 32 processes share 2 cores. Writes use sendto with MSG_NOSIGNAL:
// a peer gone is EPIPE, never SIGPIPE.
type rawIO struct {
	*net.UnixConn
	rc syscall.RawConn
}

// rawSocket wraps c as rawIO when it is a Unix socket whose descriptor the
// runtime hands out, and returns it unchanged otherwise.
func rawSocket(c net.Conn) net.Conn {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return c
	}
	return &rawIO{UnixConn: uc, rc: rc}
}

func (c *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "unix", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawIO) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	for n < len(p) && errno == 0 {
		err := c.rc.Write(func(fd uintptr) bool {
			for {
				r, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n), syscall.MSG_NOSIGNAL, 0, 0)
				switch e {
				case syscall.EINTR:
					continue
				case syscall.EAGAIN:
					return false
				case 0:
					n += int(r)
				}
				errno = e
				return true
			}
		})
		if err != nil {
			return n, err
		}
	}
	if errno != 0 {
		return n, &net.OpError{Op: "write", Net: "unix", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return n, nil
}
