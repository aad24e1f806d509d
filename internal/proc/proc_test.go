package proc

import (
	"os"
	"os/exec"
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
