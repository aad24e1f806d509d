package fsstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// faults is a fault hook whose armed points fail.
type faults struct {
	mu    sync.Mutex
	armed map[string]bool
}

var errInjected = errors.New("injected fault")

func (f *faults) hook(p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed[p] {
		return errInjected
	}
	return nil
}

func (f *faults) arm(points ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = map[string]bool{}
	for _, p := range points {
		f.armed[p] = true
	}
}

// TestRollbackFailureHeals fails a commit's fdatasync and then its
// rollback, so the log keeps the failed bytes. The session (or workflow)
// refuses writes, saying why, while the rollback keeps failing, and takes
// them again, without a reopen, once it works; a reopen then shows exactly
// what was acknowledged.
func TestRollbackFailureHeals(t *testing.T) {
	t.Run("session", func(t *testing.T) {
		dir := t.TempDir()
		var f faults
		s, err := fsstore.Open(dir, fsstore.Options{Fault: f.hook})
		must(t, err)
		defer s.Close()
		must(t, commitN(s, "s", 1))
		must(t, commitN(s, "s", 2))
		log := filepath.Join(dir, ".cairn", "sessions", "s-s.log")
		fi, err := os.Stat(log)
		must(t, err)
		committed := fi.Size()

		f.arm(fsstore.FaultCommitSync, fsstore.FaultCommitRollback)
		if err := commitN(s, "s", 3); err == nil || !strings.Contains(err.Error(), "rolling it back failed too") {
			t.Fatalf("commit with sync and rollback failing: %v", err)
		}
		if fi, _ := os.Stat(log); fi.Size() == committed {
			t.Fatalf("the failed commit's bytes are gone: the rollback was not failed")
		}
		f.arm(fsstore.FaultCommitRollback) // the cause is still there
		err = commitN(s, "s", 3)
		if err == nil || !strings.Contains(err.Error(), "repairing it failed too") || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("commit while the rollback still fails: %v", err)
		}
		f.arm() // the cause is gone
		for n := 3; n <= 4; n++ {
			if err := commitN(s, "s", n); err != nil {
				t.Fatalf("commit %d once the rollback works again: %v", n, err)
			}
		}
		must(t, s.Close())
		wantGens(t, dir, "s", 4)
	})
	t.Run("workflow", func(t *testing.T) {
		dir := t.TempDir()
		var f faults
		s, err := fsstore.Open(dir, fsstore.Options{Fault: f.hook})
		must(t, err)
		defer s.Close()
		step := func(id string) error {
			return s.SaveStep(bg, "w", "", session.StepRecord{StepID: id, Identity: "i"})
		}
		must(t, step("a"))
		f.arm(fsstore.FaultCommitSync, fsstore.FaultCommitRollback)
		if err := step("b"); err == nil || !strings.Contains(err.Error(), "rolling it back failed too") {
			t.Fatalf("step with sync and rollback failing: %v", err)
		}
		f.arm(fsstore.FaultCommitRollback)
		if err := step("c"); err == nil || !strings.Contains(err.Error(), "repairing it failed too") {
			t.Fatalf("step while the rollback still fails: %v", err)
		}
		f.arm()
		must(t, step("d"))
		must(t, s.Close())
		s2 := openT(t, dir, fsstore.Options{})
		w, err := s2.Workflow(bg, "w")
		must(t, err)
		var got []string
		for _, st := range w.Steps {
			got = append(got, st.StepID)
		}
		if strings.Join(got, ",") != "a,d" {
			t.Fatalf("after reopen the workflow holds steps %v, want [a d]", got)
		}
	})
}
