//go:build (linux && !(amd64 || arm64)) || darwin

package dirlock

import "syscall"

// statAt stats t by its whole path: here the name relative to the
// directory is not used.
func statAt(t *target, st *syscall.Stat_t) error { return syscall.Stat(t.path, st) }

// atFdcwd is not used here (statAt walks the whole path).
const atFdcwd = -1
