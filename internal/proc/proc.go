// Package proc answers questions about other processes by pid.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Stopped reports whether every thread of pid is stopped by a signal
// ('T'). kill(2) with SIGSTOP returns before that: the kernel wakes one
// thread to take the signal, and that thread stops the others, which run
// on until it does. Without /proc it reports false.
func Stopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, p := range stats {
		if st, err := stateAt(p); err != nil || st != 'T' {
			return false
		}
	}
	return true
}

func state(pid int) (byte, error) {
	return stateAt(fmt.Sprintf("/proc/%d/stat", pid))
}

// stateAt reads the state letter of a /proc stat file.
func stateAt(path string) (byte, error) {
	b, err := os.ReadFile(path)
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
