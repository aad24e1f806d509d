package proc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestGone(t *testing.T) {
	if Gone(os.Getpid()) {
		t.Fatal("this process counts as gone")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	pid := cmd.Process.Pid
	if Gone(pid) {
		t.Fatal("a running child counts as gone")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Exited, not yet reaped: a zombie, which counts as gone.
	deadline := time.Now().Add(10 * time.Second)
	for !Gone(pid) {
		if time.Now().After(deadline) {
			t.Fatal("a killed, unreaped child never counted as gone")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Wait()
	if !Gone(pid) {
		t.Fatal("a reaped child counts as running")
	}
}

func TestState(t *testing.T) {
	if st := State(os.Getpid()); st != 'R' && st != 'S' {
		t.Fatalf("this process's state is %q, want R or S", st)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatalf("sleep: %v", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !Stopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("a stopped child's state is %q, want T", State(pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := State(pid); st != 'T' {
		t.Fatalf("a child whose threads are all stopped has state %q, want T", st)
	}
	if Stopped(os.Getpid()) || Stopped(1<<30) {
		t.Fatal("Stopped: true for a running process or for no process")
	}
	if st := State(1 << 30); st != 0 {
		t.Fatalf("a pid that does not exist has state %q, want 0", st)
	}
}
