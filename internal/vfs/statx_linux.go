//go:build linux && (amd64 || arm64)

package vfs

import (
	"encoding/binary"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// noStatx is set once statx has failed with ENOSYS (kernels before 4.11,
// or a seccomp filter): sameFileNoTimes then leaves the check to lstat.
var noStatx atomic.Bool

// sameFileNoTimes is SameFileAt's check on the OS file system: name's
// device and inode, not followed, from a statx that asks for
// STATX_TYPE|STATX_INO only, compared with fi's; ok is false when statx is
// not available.
func sameFileNoTimes(name string, fi os.FileInfo) (same, ok bool, err error) {
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat || noStatx.Load() {
		return false, false, nil
	}
	const (
		atFdcwd           = -100
		atSymlinkNofollow = 0x100
		statxType         = 0x1
		statxIno          = 0x100
	)
	// The name, NUL-terminated, on the stack when it is short, as a log's
	// path is: a check before every append need not allocate.
	var pbuf [512]byte
	var p *byte
	if len(name) < len(pbuf) && strings.IndexByte(name, 0) < 0 {
		copy(pbuf[:], name)
		p = &pbuf[0]
	} else {
		var err error
		if p, err = syscall.BytePtrFromString(name); err != nil {
			return false, true, err
		}
	}
	var buf [256]byte // struct statx
	fd := atFdcwd
	for {
		_, _, e := syscall.Syscall6(sysStatx, uintptr(fd), uintptr(unsafe.Pointer(p)), atSymlinkNofollow,
			statxType|statxIno, uintptr(unsafe.Pointer(&buf[0])), 0)
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.ENOSYS, syscall.EPERM:
			noStatx.Store(true)
			return false, false, nil
		default:
			return false, true, &os.PathError{Op: "statx", Path: name, Err: e}
		}
		break
	}
	mask := binary.NativeEndian.Uint32(buf[0:])
	if mask&statxIno == 0 {
		return false, false, nil
	}
	ino := binary.NativeEndian.Uint64(buf[32:])
	major := uint64(binary.NativeEndian.Uint32(buf[136:]))
	minor := uint64(binary.NativeEndian.Uint32(buf[140:]))
	return uint64(st.Dev) == makedev(major, minor) && uint64(st.Ino) == ino, true, nil
}

// makedev encodes a device number as the kernel's stat(2) does in st_dev
// (glibc's makedev).
func makedev(major, minor uint64) uint64 {
	return (major&0xfffff000)<<32 | (major&0xfff)<<8 | (minor&0xffffff00)<<12 | minor&0xff
}
