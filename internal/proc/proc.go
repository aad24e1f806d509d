// Package proc answers questions about other processes by pid.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Gone reports whether pid no longer runs: no such process, or a zombie
// (exited, not reaped yet: by its parent, or by init once a detached
// process's parent is gone). Zombies are read from /proc; without /proc
// only an absent pid counts.
func Gone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name, which may itself
	// hold parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}
