package protocol

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/session"
)

// embeddedHolder returns an error wrapping a *session.LockedError when a
// live process that is not a cairnd holds the workspace's store lock (an
// embedded libcairn user, or any other program that opened the store
// itself): no daemon can serve the workspace until it lets go, so waiting
// for one is pointless. It returns nil when the lock is free, when its
// holder is a cairnd (starting, or on its way out), and when the holder
// cannot be told (it is gone, belongs to another user, or the platform has
// no /proc); Connect then waits for a daemon as before.
//
// The store's lock (internal/dirlock) is a flock on .cairn and on
// .cairn/LOCK, which holds the holder's pid. The pid alone proves nothing
// (the file outlives its holder), so the lock is probed as well, with a
// shared lock taken and dropped at once, and the pid read again.
func (c *Client) embeddedHolder(bin string) error {
	lockPath := layout.Lock(c.workspace)
	pid := lockPID(lockPath)
	if pid <= 0 {
		return nil
	}
	exe, ok := processExe(pid)
	if !ok || isDaemonExe(exe, bin) {
		return nil
	}
	if !stillHolds(lockPath, pid) {
		return nil
	}
	return fmt.Errorf("protocol.Connect: pid %d (%s) holds workspace %s in embedded mode, so no daemon can serve it: "+
		"close it (or its cairn handle) and connect again, or work in embedded mode inside it: %w",
		pid, filepath.Base(exe), c.workspace, &session.LockedError{Path: lockPath, PID: pid})
}

// ProcessKind tells what the live process pid is, for messages about a
// lock's holder: "cairnd" when its executable is named cairnd, else the
// base name of its executable, else "" (it is gone, belongs to another
// user, or the platform has no /proc).
func ProcessKind(pid int) string {
	exe, ok := processExe(pid)
	if !ok {
		return ""
	}
	if isDaemonExe(exe, "") {
		return "cairnd"
	}
	return filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
}

// DaemonPID returns the pid of the cairnd that holds workspace's store
// lock (the daemon serving it, answering or not), or 0: the lock is free,
// its holder is not a cairnd, or it cannot be told (see embeddedHolder).
func DaemonPID(workspace string) int {
	lockPath := layout.Lock(workspace)
	pid := lockPID(lockPath)
	if pid <= 0 || ProcessKind(pid) != "cairnd" {
		return 0
	}
	if !stillHolds(lockPath, pid) {
		return 0
	}
	return pid
}

// stillHolds reports whether pid, read from the lock file at lockPath,
// holds that lock now: the lock is taken and the file names pid still
// (the file outlives its holder, so the pid alone proves nothing).
func stillHolds(lockPath string, pid int) bool {
	return lockHeld(lockPath) && lockPID(lockPath) == pid
}

// lockPID returns the pid the lock file at path holds, or 0.
func lockPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// lockHeld reports whether another open file description holds an
// exclusive flock on the file at path. The probe takes a shared lock and
// drops it at once; a writer that tries to lock in that instant fails as
// if the lock were held, which Connect's restart loop absorbs.
func lockHeld(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// isDaemonExe reports whether exe, a process's executable, is a cairnd:
// the daemon Connect would start, or any program named cairnd (a daemon
// started from another build). A replaced executable reads " (deleted)".
func isDaemonExe(exe, bin string) bool {
	exe = strings.TrimSuffix(exe, " (deleted)")
	if filepath.Base(exe) == "cairnd" {
		return true
	}
	a, err1 := os.Stat(exe)
	b, err2 := os.Stat(bin)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}
