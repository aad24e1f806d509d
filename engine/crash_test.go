package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// The crash test runs an agent-like loop in a child process (this test
// binary re-executed with crashChildEnv set): begin a run, then checkpoint
// after every turn, printing "turn N" once Checkpoint has returned. The
// parent SIGKILLs the child at a random moment, reopens the store, and
// checks that ResumeRun hands back the last acknowledged boundary (or the
// one after it, committed but not yet acknowledged when the kill landed)
// with messages, usage and tool calls carried on, then finishes the run.

const (
	crashChildEnv   = "CAIRN_ENGINE_CRASH_CHILD" // store root
	crashRunEnv     = "CAIRN_ENGINE_CRASH_RUN"   // run id to begin
	crashSession    = "agent"
	crashIterations = 60
	crashMaxTurns   = 5000
)

// Turn k of run i is deterministic, so the parent can check any boundary.
func crashMessages(run string, turn int64) []session.Value {
	return []session.Value{
		session.Value(fmt.Sprintf(`{"run":%q,"turn":%d,"role":"assistant"}`, run, turn)),
		session.Value(fmt.Sprintf(`{"run":%q,"turn":%d,"role":"tool",  "out": "ok"}`, run, turn)),
	}
}

func crashUsage(turn int64) session.Usage {
	return session.Usage{InputTokens: 7 * turn, OutputTokens: 3 * turn, TotalTokens: 10 * turn, Cost: float64(turn) / 4}
}

// runCrashChild is the child's main: it never returns normally before the
// parent kills it, unless it runs out of turns.
func runCrashChild() int {
	root, runID := os.Getenv(crashChildEnv), os.Getenv(crashRunEnv)
	st, err := fsstore.Open(root, fsstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 2
	}
	e := engine.New(st, engine.Options{})
	defer e.Close()
	ctx := context.Background()
	if _, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: crashSession, RunID: runID}); err != nil {
		fmt.Fprintln(os.Stderr, "child: begin:", err)
		return 2
	}
	fmt.Fprintln(os.Stdout, "begun")
	for turn := int64(1); turn <= crashMaxTurns; turn++ {
		_, err := e.Checkpoint(ctx, api.CheckpointRequest{
			RunID: runID, Turn: turn, NewMessages: crashMessages(runID, turn),
			Usage: crashUsage(turn), ToolCallsCount: turn, State: session.Value(fmt.Sprintf(`{"next":%d}`, turn+1)),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: checkpoint:", err)
			return 2
		}
		// One write(2) of a short line: the parent sees it whole or not
		// at all.
		fmt.Fprintf(os.Stdout, "turn %d\n", turn)
	}
	return 0
}

// killChild starts the child, waits for `acks` acknowledged turns plus a
// random pause, SIGKILLs it, reaps it and returns the last acknowledged
// turn (-1: not even begun).
func killChild(t *testing.T, root, runID string, acks int, rng *rand.Rand) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+root, crashRunEnv+"="+runID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	noErr(t, err)
	noErr(t, cmd.Start())

	lines := make(chan string, 64)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil { // a fragment without '\n' is not an acknowledgement
				_, _ = io.Copy(io.Discard, r)
				return
			}
			lines <- strings.TrimSpace(line)
		}
	}()

	last := int64(-1)
	seen := 0
	waitAcks := true
	for waitAcks && seen < acks {
		select {
		case l, ok := <-lines:
			if !ok {
				waitAcks = false
				break
			}
			last = parseAck(t, l, last)
			if strings.HasPrefix(l, "turn ") {
				seen++
			}
		case <-ctx.Done():
			t.Fatalf("child made no progress: %s", stderr.String())
		}
	}
	if d := rng.IntN(3000); d > 0 {
		time.Sleep(time.Duration(d) * time.Microsecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for l := range lines {
		last = parseAck(t, l, last)
	}
	<-readDone
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child was not killed (%v): %s", err, stderr.String())
	}
	return last
}

func parseAck(t *testing.T, line string, last int64) int64 {
	t.Helper()
	switch {
	case line == "begun":
		return max(last, 0)
	case strings.HasPrefix(line, "turn "):
		n, err := strconv.ParseInt(strings.TrimPrefix(line, "turn "), 10, 64)
		if err != nil || n != last+1 {
			t.Fatalf("child printed %q after turn %d", line, last)
		}
		return n
	}
	t.Fatalf("child printed %q", line)
	return last
}

func TestCrashResumeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test re-executes the test binary; skipped in -short mode")
	}
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	open := func() *engine.Engine {
		t.Helper()
		st, err := fsstore.Open(root, fsstore.Options{})
		noErr(t, err)
		return engine.New(st, engine.Options{})
	}
	ctx := testkit.Context(t)
	e := open()
	saveDelta(t, e, crashSession, session.Value(`{"role":"user","content":"go"}`))
	noErr(t, e.Close())
	msgCount := int64(1)
	kinds := map[string]int{}

	for i := range crashIterations {
		runID := fmt.Sprintf("r%d", i)
		acks := rng.IntN(8) // 0: the kill may land before the run even begins
		acked := killChild(t, root, runID, acks, rng)

		e := open()
		res, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: runID, SessionID: crashSession, NewRunID: runID + "-resumed"})
		if acked < 1 && session.CodeOf(err) == session.CodeNoCheckpoint {
			// Killed before the first checkpoint was durable: nothing to
			// resume, and the engine says so instead of inventing a
			// boundary. Close the run if it had begun.
			kinds["before first checkpoint"]++
			if _, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: runID, Status: session.RunFailed}); err != nil {
				wantCode(t, err, session.CodeNotFound)
			}
			noErr(t, e.Close())
			continue
		}
		if err != nil {
			t.Fatalf("iteration %d: resume after %d acknowledged turns: %v", i, acked, err)
		}
		turn := res.Turn
		// Acknowledged means durable: the boundary is the last
		// acknowledged turn, or the next one if its commit landed and
		// only the acknowledgement was lost.
		if turn < acked || turn > acked+1 || turn < 1 {
			t.Fatalf("iteration %d: resumed at turn %d, last acknowledged %d", i, turn, acked)
		}
		if turn == acked {
			kinds["at last acknowledged turn"]++
		} else {
			kinds["one unacknowledged turn later"]++
		}
		if res.Usage != crashUsage(turn) || res.ToolCallsCount != turn {
			t.Fatalf("iteration %d: counters did not carry on: usage %+v, tool calls %d at turn %d", i, res.Usage, res.ToolCallsCount, turn)
		}
		if string(res.State) != fmt.Sprintf(`{"next":%d}`, turn+1) {
			t.Fatalf("iteration %d: state %s at turn %d", i, res.State, turn)
		}
		wantCount := msgCount + 2*turn
		if int64(len(res.Messages)) != wantCount {
			t.Fatalf("iteration %d: %d messages at the boundary, want %d", i, len(res.Messages), wantCount)
		}
		lastMsgs := crashMessages(runID, turn)
		if string(res.Messages[wantCount-1]) != string(lastMsgs[1]) || string(res.Messages[wantCount-2]) != string(lastMsgs[0]) {
			t.Fatalf("iteration %d: boundary messages %s %s", i, res.Messages[wantCount-2], res.Messages[wantCount-1])
		}

		// Continue the run from the boundary and complete it.
		next := res.RunID
		for k := turn + 1; k <= turn+2; k++ {
			_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: next, Turn: k, NewMessages: crashMessages(next, k), Usage: crashUsage(k), ToolCallsCount: k})
			noErr(t, err)
		}
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: next, Status: session.RunCompleted})
		noErr(t, err)
		rs, err := e.ResumeSession(ctx, crashSession)
		noErr(t, err)
		if len(rs.InterruptedRuns) != 0 {
			t.Fatalf("iteration %d: checkpoints left after completing: %+v", i, rs.InterruptedRuns)
		}
		var old, nw *session.Run
		for j := range rs.Snapshot.Runs {
			switch rs.Snapshot.Runs[j].RunID {
			case runID:
				old = &rs.Snapshot.Runs[j]
			case next:
				nw = &rs.Snapshot.Runs[j]
			}
		}
		if old == nil || old.Status != session.RunInterrupted || nw == nil || nw.ParentRunID != runID || nw.Status != session.RunCompleted ||
			nw.Usage != crashUsage(turn+2) || nw.ToolCallsCount != turn+2 {
			t.Fatalf("iteration %d: runs after completion: old %+v new %+v", i, old, nw)
		}
		msgCount = int64(len(rs.Snapshot.Messages))
		if msgCount != wantCount+4 {
			t.Fatalf("iteration %d: %d messages after completion, want %d", i, msgCount, wantCount+4)
		}
		noErr(t, e.Close())
	}
	t.Logf("outcomes over %d kills: %v", crashIterations, kinds)
}
