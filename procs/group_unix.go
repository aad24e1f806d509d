//go:build unix

package procs

import (
	"errors"
	"os/exec"
	"syscall"
)

// logOpenFlags open a log for appending without following a symlink.
const logOpenFlags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_APPEND | syscall.O_NOFOLLOW | syscall.O_CLOEXEC

// setGroup puts a health command in its own process group, so a timeout
// kills it together with anything it started.
func setGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// setDetached makes a restarted process the leader of a new session (and
// so of a new process group, pgid = pid), with no controlling terminal: it
// does not get the caller's terminal signals and outlives the caller.
func setDetached(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error { return signalGroup(pgid, syscall.SIGKILL) }

// termGroup sends SIGTERM to the process group pgid.
func termGroup(pgid int) error { return signalGroup(pgid, syscall.SIGTERM) }

func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return errors.New("procs: no process group")
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// groupAlive reports whether any process is left in group pgid.
func groupAlive(pgid int) bool {
	return pgid > 0 && !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}
