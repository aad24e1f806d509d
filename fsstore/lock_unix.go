//go:build linux || darwin

package fsstore

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/session"
)

// acquireLock takes the exclusive advisory lock on path for the life of the
// returned file and writes this process's pid into it. When another open
// file description holds it (another process, or another Open in this one)
// it returns a *session.LockedError naming the holder's pid.
func acquireLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, session.Errorf(session.CodeInternal, "fsstore.Open: open lock %s: %v", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &session.LockedError{Path: path, PID: readPID(f)}
		}
		return nil, session.Errorf(session.CodeInternal, "fsstore.Open: flock %s: %v", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// readPID reads the holder's pid. The holder writes it just after taking the
// lock, so a racing reader may briefly see an empty file; retry a little.
func readPID(f *os.File) int {
	for i := 0; i < 20; i++ {
		buf := make([]byte, 32)
		n, _ := f.ReadAt(buf, 0)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); err == nil && pid > 0 {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

func releaseLock(f *os.File) error {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}
