//go:build linux

// Command goembedfloor, built with -buildmode=c-shared, is the least an
// embedded Go library can add to the agent turn on this machine, for
// bench/agent/embedded_floor.py's "gofloor" contestant: the host calls
// floor_commit with the turn's params (the JSON Client.checkpoint
// encodes) through the same ctypes and cgo crossing as libcairn's
// cairn_call_buf, and the call writes them with one pwrite into
// preallocated, already synced zeros and one fdatasync. No decoding, no
// checks, no index: what is left is the Python encoding, the crossing
// into the Go runtime (with the runtime's monitor thread that libcairn
// wakes too) and the disk.
package main

import "C"

import (
	"os"
	"sync"
	"unsafe"

	"github.com/cairn-dev/cairn/bench/internal/zerofile"
	"github.com/cairn-dev/cairn/internal/vfs"
)

// size is the data file's length; commits wrap around before its end.
const size = 32 << 20

var (
	mu  sync.Mutex
	f   *os.File
	off int64
)

// floor_open creates path as size bytes of synced zeros for floor_commit.
// It returns 0, or -1 when the file cannot be made.
//
//export floor_open
func floor_open(path *C.char) C.int {
	nf, err := zerofile.Create(C.GoString(path), size)
	if err != nil {
		return -1
	}
	mu.Lock()
	f, off = nf, 0
	mu.Unlock()
	return 0
}

// floor_commit makes the n bytes at p durable and returns the offset
// reached, or -1 when the write or the flush fails.
//
//export floor_commit
func floor_commit(p unsafe.Pointer, n C.size_t) C.longlong {
	b := unsafe.Slice((*byte)(p), int(n))
	mu.Lock()
	defer mu.Unlock()
	if f == nil || len(b) > size/2 {
		return -1
	}
	if off+int64(len(b)) > size {
		off = 0
	}
	if _, err := f.WriteAt(b, off); err != nil {
		return -1
	}
	if vfs.Fdatasync(f) != nil {
		return -1
	}
	off += int64(len(b))
	return C.longlong(off)
}

func main() {}
