package vfs

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data and the metadata needed to read it back,
// retrying on EINTR.
func Fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
