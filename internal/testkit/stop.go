package testkit

import (
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/proc"
)

// Stop stops pid with SIGSTOP and returns once every one of its threads
// is stopped, with what resumes it (SIGCONT, once), which also runs when
// the test ends.
//
// kill(2) returns before the process stops: until the thread the kernel
// woke for the signal runs and stops the others, they run on, so a daemon
// on a busy machine can still accept and answer a connection made just
// after kill returned.
func Stop(t testing.TB, pid int) (resume func()) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	if _, err := os.Stat("/proc/self/task"); err != nil {
		return resume // no /proc to wait on: as good as kill(2) gives
	}
	deadline := time.Now().Add(Timeout)
	for !proc.Stopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: not every thread stopped within %v of SIGSTOP", pid, Timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return resume
}
