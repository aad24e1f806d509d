//go:build !linux

package fsstore_test

import "errors"

// setImmutable is Linux-only (the FS_IOC_SETFLAGS ioctl); elsewhere the
// immutable case says it cannot run.
func setImmutable(path string, on bool) error { return errors.ErrUnsupported }
