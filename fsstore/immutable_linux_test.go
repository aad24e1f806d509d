package fsstore_test

import (
	"os"
	"syscall"
	"unsafe"
)

// setImmutable sets or clears the file's immutable flag (chattr +i), as
// root on a file system that has one.
func setImmutable(path string, on bool) error {
	const (
		fsIocGetflags = 0x80086601
		fsIocSetflags = 0x40086602
		fsImmutableFl = 0x10
	)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var flags int
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIocGetflags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	if on {
		flags |= fsImmutableFl
	} else {
		flags &^= fsImmutableFl
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIocSetflags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	return nil
}
