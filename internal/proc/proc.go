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
	st, err := state(pid)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return st == 'Z' || st == 'X'
}

// State returns pid's state letter as /proc/<pid>/stat gives it ('R'
// running, 'S' sleeping, 'D' waiting on a device, 'T' stopped by a
// signal, 't' stopped by a tracer, 'Z' a zombie, ...), or 0 when it cannot
// be read (no such process, or no /proc).
func State(pid int) byte {
	st, _ := state(pid)
	return st
}

func state(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The state follows the parenthesised command name, which may itself
	// hold parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, nil
	}
	return b[i+2], nil
}
