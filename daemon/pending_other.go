//go:build !(linux && (amd64 || arm64 || 386 || arm || riscv64 || loong64 || s390x))

package daemon

import "syscall"

// pendingInput cannot tell unread bytes apart here: connections always
// pass reading on while a request runs (see pace).
func pendingInput(syscall.RawConn) (pending, ok bool) { return false, false }
