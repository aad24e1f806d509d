package fsstore_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// checkSession opens the store and checks that session "k" holds exactly
// messages 1..gen, byte for byte, at a generation of at least minGen.
func checkSession(t *testing.T, dir string, minGen uint64) uint64 {
	t.Helper()
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	return checkLoop(t, s, "k", minGen)
}

// checkLoop checks that session id of s holds what a commit loop
// (childCommitLoop) wrote: messages 1..gen byte for byte, the run, handoff
// and checkpoint of generation gen, at a generation of at least minGen.
func checkLoop(t *testing.T, s *fsstore.Store, id string, minGen uint64) uint64 {
	t.Helper()
	st, err := s.Load(bg, id, 0)
	if err != nil {
		if minGen == 0 && session.CodeOf(err) == session.CodeNotFound {
			return 0
		}
		t.Fatalf("load %s after kill: %v", id, err)
	}
	snap := st.Snapshot
	if snap.Generation < minGen {
		t.Fatalf("store reopened at generation %d, but generation %d was acknowledged", snap.Generation, minGen)
	}
	if len(snap.Messages) != int(snap.Generation) {
		t.Fatalf("generation %d has %d messages", snap.Generation, len(snap.Messages))
	}
	for i, m := range snap.Messages {
		if !bytes.Equal(m, message(i+1)) {
			t.Fatalf("generation %d: message %d differs from what was committed", snap.Generation, i+1)
		}
	}
	if len(snap.Runs) != 1 || snap.Runs[0].ToolCallsCount != int64(snap.Generation) {
		t.Fatalf("generation %d: run record %+v does not belong to it", snap.Generation, snap.Runs)
	}
	if h := snap.Handoff; h == nil || h.Done[0] != fmt.Sprint(snap.Generation) {
		t.Fatalf("generation %d: handoff %v does not belong to it", snap.Generation, h)
	}
	if g := snap.Generation; g >= 3 {
		cp := st.Checkpoints["run"]
		want := int64(g - g%3)
		if cp == nil || cp.Turn != want || cp.MessageCount != want || string(cp.State) != fmt.Sprint(want) {
			t.Fatalf("generation %d: checkpoint %+v, want turn %d", g, cp, want)
		}
	}
	return snap.Generation
}

// TestKillDuringCommits kills a committing child with SIGKILL at random
// moments, at least 200 times, and checks after each kill that the store
// reopens complete at or after the last acknowledged generation. Under
// -race or -short it kills 40 times: the race detector makes each round
// about 3.5 times slower and adds little (one child commits alone), and
// `make test-norace` runs the 200 without it.
func TestKillDuringCommits(t *testing.T) {
	dir := t.TempDir()
	kills := 200
	if testing.Short() || raceEnabled {
		kills = 40
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var acked, compactions uint64
	for i := 0; i < kills; i++ {
		var childCompactions uint64
		killChild(t, "commit-loop", dir, rng, 12, func(line string) {
			var g, c uint64
			if _, err := fmt.Sscanf(line, "ack %d %d", &g, &c); err == nil {
				acked = max(acked, g)
				childCompactions = max(childCompactions, c)
			}
		})
		compactions += childCompactions
		acked = max(acked, checkSession(t, dir, acked))
	}
	t.Logf("%d kills, %d generations acknowledged, %d compactions completed before a kill", kills, acked, compactions)
	if compactions == 0 {
		t.Fatalf("no compaction ran during the kills; the test does not cover it")
	}
	if acked < uint64(kills/4) {
		t.Fatalf("only %d generations in %d runs: the child barely committed", acked, kills)
	}
}

// killChild starts the test binary in role on dir, waits for its line
// starting "ready", lets it print up to maxLines more (a random number of
// them, so the test makes progress however slow the machine), kills it with
// SIGKILL at a random instant after, and hands every line it printed after
// "ready" to note. It fails t unless the child died of the kill.
func killChild(t *testing.T, role, dir string, rng *rand.Rand, maxLines int, note func(line string)) {
	t.Helper()
	cmd := startChild(t, role, dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if ready := <-lines; !strings.HasPrefix(ready, "ready") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q", ready)
	}
	deadline := time.After(20 * time.Second)
	for want := rng.IntN(maxLines); want > 0; want-- {
		select {
		case line, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("child exited early")
			}
			note(line)
		case <-deadline:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child made no progress")
		}
	}
	time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		note(line)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child exited by itself (%v) before the kill", err)
	}
}

// prepare makes session "s" with two generations and a dead run record so
// it can be compacted, and returns its content.
func prepare(t *testing.T, dir string) *session.State {
	t.Helper()
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 1; i <= 2; i++ {
		if _, err := s.Commit(bg, "s", &session.Change{
			AppendMessages: []session.Value{message(i)},
			UpsertRuns:     []session.Run{{RunID: "r", Status: session.RunRunning, ToolCallsCount: int64(i)}},
		}, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Load(bg, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sameState(t *testing.T, what string, got, want *session.State) {
	t.Helper()
	g, w := got.Snapshot, want.Snapshot
	if g.Generation != w.Generation || len(g.Messages) != len(w.Messages) || len(g.Runs) != len(w.Runs) {
		t.Fatalf("%s: generation %d with %d messages, want %d with %d", what, g.Generation, len(g.Messages), w.Generation, len(w.Messages))
	}
	for i := range g.Messages {
		if !bytes.Equal(g.Messages[i], w.Messages[i]) {
			t.Fatalf("%s: message %d differs", what, i)
		}
	}
	if g.Runs[0] != w.Runs[0] {
		t.Fatalf("%s: run %+v, want %+v", what, g.Runs[0], w.Runs[0])
	}
}

func noTemps(t *testing.T, dir string) {
	t.Helper()
	for _, sub := range []string{"sessions", "workflows"} {
		entries, _ := os.ReadDir(filepath.Join(dir, ".cairn", sub))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Fatalf("left behind after recovery: %s/%s", sub, e.Name())
			}
		}
	}
}

// TestFaultStop stops the process at each fault point in turn and checks
// what a reader sees after recovery.
func TestFaultStop(t *testing.T) {
	for _, point := range fsstore.FaultPoints {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			before := prepare(t, dir)
			cmd := startChild(t, "fault-stop", dir, "CAIRN_FSSTORE_POINT="+point)
			err := cmd.Run()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				t.Fatalf("child did not stop at %s: %v", point, err)
			}
			s, err := fsstore.Open(dir, fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			noTemps(t, dir)
			st, err := s.Load(bg, "s", 0)
			if err != nil {
				t.Fatal(err)
			}
			written := point == fsstore.FaultCommitAfterWrite || point == fsstore.FaultCommitSync || point == fsstore.FaultCommitAfterSync
			switch {
			case written && st.Snapshot.Generation == 3:
				// The bytes were written before the stop and a killed
				// process does not lose the page cache: the commit may be
				// there, but only whole.
				if !bytes.Equal(st.Snapshot.Messages[2], message(99)) || len(st.Snapshot.Messages) != 3 {
					t.Fatalf("commit stopped at %s is torn", point)
				}
			default:
				sameState(t, "after stop at "+point, st, before)
			}
			newSt, err := s.Load(bg, "new", 0)
			if point == fsstore.FaultCreateAfterRename && err == nil {
				if len(newSt.Snapshot.Messages) != 1 || !bytes.Equal(newSt.Snapshot.Messages[0], message(1)) {
					t.Fatalf("created session is torn")
				}
			} else if session.CodeOf(err) != session.CodeNotFound {
				t.Fatalf("session from a stopped create: %v", err)
			}
			if _, err := s.Commit(bg, "s", &session.Change{AppendMessages: []session.Value{message(7)}}, session.CommitOptions{}); err != nil {
				t.Fatalf("next commit after recovery: %v", err)
			}
		})
	}
}

// TestFaultErrors fails each step of a commit, a create and a compaction in
// turn, and checks that the previous generation stays intact and readable,
// and that the next commit succeeds.
func TestFaultErrors(t *testing.T) {
	injected := errors.New("injected fault")
	for _, point := range fsstore.FaultPoints {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			before := prepare(t, dir)
			armed, healFails := true, false
			s, err := fsstore.Open(dir, fsstore.Options{Fault: func(p string) error {
				if armed && p == point || healFails && p == fsstore.FaultCommitRollback {
					return injected
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			switch {
			case strings.HasPrefix(point, "create."):
				_, err = s.Commit(bg, "new", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})
			case strings.HasPrefix(point, "compact."):
				err = s.Compact(bg, "s")
			default:
				_, err = s.Commit(bg, "s", &session.Change{AppendMessages: []session.Value{message(99)}}, session.CommitOptions{})
			}
			if !errors.Is(err, injected) && !strings.Contains(fmt.Sprint(err), injected.Error()) {
				t.Fatalf("operation at %s returned %v, want the injected fault", point, err)
			}
			armed = false
			st, err := s.Load(bg, "s", 0)
			if err != nil {
				t.Fatal(err)
			}
			sameState(t, "after failed "+point, st, before)
			if _, err := s.Load(bg, "new", 0); session.CodeOf(err) != session.CodeNotFound {
				t.Fatalf("failed create left a session: %v", err)
			}
			if point == fsstore.FaultCompactAfterRename {
				// The directory sync after the switch failed: the store
				// refuses to append to a log whose name may not be durable
				// until it has repaired it (synced the directory again),
				// which the next commit tries, without a reopen.
				healFails = true
				if _, err := s.Commit(bg, "s", &session.Change{}, session.CommitOptions{}); err == nil {
					t.Fatalf("commit accepted on a log whose rename may not be durable")
				}
				healFails = false
			}
			res, err := s.Commit(bg, "s", &session.Change{AppendMessages: []session.Value{message(3)}}, session.CommitOptions{})
			if err != nil || res.Generation != 3 {
				t.Fatalf("next commit after failed %s: %+v, %v", point, res, err)
			}
			s.Close()
			s, err = fsstore.Open(dir, fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			noTemps(t, dir)
			st, err = s.Load(bg, "s", 0)
			if err != nil || st.Snapshot.Generation != 3 || !bytes.Equal(st.Snapshot.Messages[2], message(3)) {
				t.Fatalf("after reopen: %v", err)
			}
		})
	}
}

// TestTornTail damages the end of a log by hand and checks that recovery
// keeps every complete commit and trims the rest.
func TestTornTail(t *testing.T) {
	build := func(t *testing.T) (dir, log string, sizes []int64) {
		dir = t.TempDir()
		s, err := fsstore.Open(dir, fsstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		log = filepath.Join(dir, ".cairn", "sessions", "s-k.log")
		for i := 1; i <= 3; i++ {
			if _, err := s.Commit(bg, "k", &session.Change{
				AppendMessages: []session.Value{message(i)},
				UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning, ToolCallsCount: int64(i)}},
				Handoff:        handoffFor(i),
				Checkpoint:     ckptFor(i),
			}, session.CommitOptions{}); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, fi.Size())
		}
		s.Close()
		return dir, log, sizes
	}
	damage := []struct {
		name    string
		wantGen uint64
		do      func(log string, sizes []int64) error
	}{
		{"truncate one byte", 2, func(log string, sizes []int64) error { return os.Truncate(log, sizes[2]-1) }},
		{"truncate inside the commit record header", 2, func(log string, sizes []int64) error { return os.Truncate(log, sizes[2]-40) }},
		{"truncate to the previous commit plus a byte", 2, func(log string, sizes []int64) error { return os.Truncate(log, sizes[1]+1) }},
		{"flip a byte in the last commit record", 2, func(log string, sizes []int64) error { return flip(log, sizes[2]-3) }},
		{"zeros appended", 3, func(log string, sizes []int64) error { return appendBytes(log, make([]byte, 4096)) }},
		{"garbage appended", 3, func(log string, sizes []int64) error {
			return appendBytes(log, []byte("\x10\x00\x00\x00garbage-garbage-garbage"))
		}},
		{"last commit appended again", 3, func(log string, sizes []int64) error {
			data, err := os.ReadFile(log)
			if err != nil {
				return err
			}
			return appendBytes(log, data[sizes[1]:sizes[2]])
		}},
		{"last commit without its commit record", 2, func(log string, sizes []int64) error {
			data, err := os.ReadFile(log)
			if err != nil {
				return err
			}
			// Drop the commit record: the last record of the file.
			for cut := sizes[2] - 1; cut > sizes[1]; cut-- {
				if err := os.Truncate(log, cut); err != nil {
					return err
				}
				if _, _, err := fsstore.ScanForTest(data[:cut]); err == nil {
					return nil
				}
			}
			return nil
		}},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			dir, log, sizes := build(t)
			if err := d.do(log, sizes); err != nil {
				t.Fatal(err)
			}
			got := checkSession(t, dir, d.wantGen)
			if got != d.wantGen {
				t.Fatalf("recovered generation %d, want %d", got, d.wantGen)
			}
			if fi, _ := os.Stat(log); fi.Size() != sizes[d.wantGen-1] {
				t.Fatalf("log is %d bytes after recovery, want %d", fi.Size(), sizes[d.wantGen-1])
			}
			s, err := fsstore.Open(dir, fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Commit(bg, "k", &session.Change{
				AppendMessages: []session.Value{message(int(got) + 1)},
				UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning, ToolCallsCount: int64(got) + 1}},
				Handoff:        handoffFor(int(got) + 1),
				Checkpoint:     ckptFor(int(got) + 1),
			}, session.CommitOptions{})
			s.Close()
			if err != nil || res.Generation != got+1 {
				t.Fatalf("commit after recovery: %+v %v", res, err)
			}
			checkSession(t, dir, got+1)
		})
	}
}

func ckptFor(i int) *session.LoopCheckpoint {
	if i%3 != 0 {
		return nil
	}
	return &session.LoopCheckpoint{RunID: "run", Turn: int64(i), ToolCallsCount: int64(i), State: session.Value(fmt.Sprint(i))}
}

func flip(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, off)
	return err
}

func appendBytes(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(b)
	return err
}

// TestLockedAcrossProcesses checks that a second process gets a locked
// error naming the holder, and that the store opens once the holder exits.
func TestLockedAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := startChild(t, "hold-lock", dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("child said %q", line)
	}
	_, err := fsstore.Open(dir, fsstore.Options{})
	var le *session.LockedError
	if !errors.As(err, &le) || !errors.Is(err, session.ErrLocked) || le.HolderPID() != cmd.Process.Pid {
		t.Fatalf("second open: %v, want locked by pid %d", err, cmd.Process.Pid)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(cmd.Process.Pid)) {
		t.Fatalf("locked error does not name the pid: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatalf("open after the holder exited: %v", err)
	}
	// In the same process a second open is refused too.
	if _, err := fsstore.Open(dir, fsstore.Options{}); !errors.Is(err, session.ErrLocked) {
		t.Fatalf("second open in one process: %v", err)
	}
	s.Close()
}
