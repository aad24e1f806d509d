package protocol_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// runChildEnv makes the test binary a host loop over StartRun (see
// runChild), to be SIGKILLed by TestStartRunKilled.
const runChildEnv = "CAIRN_TEST_RUN_CHILD"

// runChildArgs is what the parent tells a runChild: the workspace of a
// running daemon, the session, the last turn, and where to wait to be
// killed: "between:N" after turn N is saved, "tool:N" in the middle of turn
// N's tool call, "" to finish and complete the run.
type runChildArgs struct {
	Workspace, Session, Stop string
	Turns                    int64
}

// runEvent is one line a runChild prints.
type runEvent struct {
	Event       string        `json:"event"`
	RunID       string        `json:"run_id,omitempty"`
	ResumedFrom string        `json:"resumed_from,omitempty"`
	Turn        int64         `json:"turn"`
	Usage       session.Usage `json:"usage"`
	Tools       int64         `json:"tools"`
	State       string        `json:"state,omitempty"`
	Messages    int           `json:"messages"`
	Error       string        `json:"error,omitempty"`
}

// runChild resumes the session's interrupted run (or starts one) and runs
// turns up to a.Turns, each a tool call and then its checkpoint.
func runChild(spec string) int {
	var a runChildArgs
	out := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		_ = out.Encode(runEvent{Event: "error", Error: err.Error()})
		return 1
	}
	if err := json.Unmarshal([]byte(spec), &a); err != nil {
		return fail(err)
	}
	ctx := context.Background()
	c, err := protocol.Connect(ctx, a.Workspace, &protocol.Options{NoAutoStart: true})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	run, err := c.StartRun(ctx, a.Session, protocol.RunOptions{Resume: true})
	if err != nil {
		return fail(err)
	}
	_ = out.Encode(runEvent{Event: "start", RunID: run.RunID(), ResumedFrom: run.ResumedFrom(), Turn: run.Turns(),
		Usage: run.Usage(), Tools: run.ToolCallsCount(), State: string(run.State()), Messages: len(run.Messages())})
	for n := run.Turns() + 1; n <= a.Turns; n++ {
		_ = out.Encode(runEvent{Event: "tool", Turn: n})
		if a.Stop == fmt.Sprintf("tool:%d", n) {
			select {} // killed here, in the middle of the tool call
		}
		msgs := []session.Value{
			session.Value(fmt.Sprintf(`{"role":"assistant","content":"call tool %d"}`, n)),
			session.Value(fmt.Sprintf(`{"role":"tool","content":"result %d"}`, n)),
		}
		if _, err := run.Turn(ctx, protocol.Turn{Messages: msgs, Usage: session.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
			ToolCalls: 1, State: session.Value(fmt.Sprintf(`{"step":%d}`, n))}); err != nil {
			return fail(err)
		}
		_ = out.Encode(runEvent{Event: "turn", Turn: n})
		if a.Stop == fmt.Sprintf("between:%d", n) {
			select {} // killed here, between two turns
		}
	}
	if err := run.Complete(ctx); err != nil {
		return fail(err)
	}
	_ = out.Encode(runEvent{Event: "done", RunID: run.RunID(), Turn: run.Turns(), Usage: run.Usage(), Tools: run.ToolCallsCount()})
	return 0
}

// startRunChild runs a runChild until it prints an event that until
// accepts (then SIGKILLs it) or, with until nil, until it exits cleanly.
func startRunChild(t *testing.T, a runChildArgs, until func(runEvent) bool) []runEvent {
	t.Helper()
	spec, _ := json.Marshal(a)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runChildEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var events []runEvent
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var e runEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("child printed %q: %v", sc.Text(), err)
		}
		events = append(events, e)
		if until != nil && until(e) {
			_ = cmd.Process.Kill() // SIGKILL
			killed = true
			break
		}
	}
	err = cmd.Wait()
	switch {
	case until != nil && !killed:
		t.Fatalf("child ended (%v) before it was killed: %+v", err, events)
	case until == nil && err != nil:
		t.Fatalf("child failed: %v: %+v", err, events)
	}
	return events
}

// startDaemonAt starts the test binary's cairnd on a fresh workspace and
// returns the workspace and a client; the daemon is killed at cleanup.
func startDaemonAt(t *testing.T) (string, *protocol.Client) {
	t.Helper()
	ws := t.TempDir()
	cmd := exec.Command(cairnd(t), "--workspace", ws, "--no-track-files")
	logf, err := os.Create(filepath.Join(t.TempDir(), "cairnd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		c, err := protocol.Connect(ctx, ws, &protocol.Options{NoAutoStart: true})
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			return ws, c
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("cairnd exited before answering; log:\n%s", log)
		case <-ctx.Done():
			t.Fatalf("cairnd did not answer: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStartRunKilled SIGKILLs a host loop between two turns and then in the
// middle of a tool call; each new process resumes from the last finished
// turn with the usage and tool-call counters carried on, and the session
// ends with every turn's messages once and the line completed.
func TestStartRunKilled(t *testing.T) {
	ws, c := startDaemonAt(t)
	args := func(stop string) runChildArgs {
		return runChildArgs{Workspace: ws, Session: "s1", Turns: 5, Stop: stop}
	}
	a := startRunChild(t, args("between:2"), func(e runEvent) bool { return e.Event == "turn" && e.Turn == 2 })
	if a[0].ResumedFrom != "" || a[0].Turn != 0 {
		t.Fatalf("first start: %+v", a[0])
	}
	b := startRunChild(t, args("tool:4"), func(e runEvent) bool { return e.Event == "tool" && e.Turn == 4 })
	want := runEvent{Event: "start", RunID: b[0].RunID, ResumedFrom: a[0].RunID, Turn: 2,
		Usage: session.Usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}, Tools: 2, State: `{"step":2}`, Messages: 4}
	if b[0] != want {
		t.Fatalf("resumed after the kill between turns:\n got %+v\nwant %+v", b[0], want)
	}
	d := startRunChild(t, args(""), nil)
	want = runEvent{Event: "start", RunID: d[0].RunID, ResumedFrom: b[0].RunID, Turn: 3,
		Usage: session.Usage{InputTokens: 30, OutputTokens: 15, TotalTokens: 45}, Tools: 3, State: `{"step":3}`, Messages: 6}
	if d[0] != want {
		t.Fatalf("resumed after the kill mid tool call:\n got %+v\nwant %+v", d[0], want)
	}
	done := d[len(d)-1]
	if done.Event != "done" || done.Turn != 5 || done.Tools != 5 || done.Usage.InputTokens != 50 {
		t.Fatalf("last event: %+v", done)
	}

	ctx := context.Background()
	page, err := c.Messages(ctx, api.MessagesRequest{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page.Messages {
		var v struct{ Content string }
		_ = json.Unmarshal(m, &v)
		got = append(got, v.Content)
	}
	var wantMsgs []string
	for n := 1; n <= 5; n++ {
		wantMsgs = append(wantMsgs, fmt.Sprintf("call tool %d", n), fmt.Sprintf("result %d", n))
	}
	if strings.Join(got, "|") != strings.Join(wantMsgs, "|") {
		t.Fatalf("messages:\n got %q\nwant %q", got, wantMsgs)
	}
	rec, err := c.Run(ctx, api.RunRequest{RunID: done.RunID, SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Run.Status != "completed" || rec.Run.ToolCallsCount != 5 || rec.Run.Usage.InputTokens != 50 {
		t.Fatalf("run record: %+v", rec.Run)
	}
}

// TestWithRun completes a run whose function returns nil and leaves one
// whose function fails resumable.
func TestWithRun(t *testing.T) {
	_, c := startDaemonAt(t)
	ctx := context.Background()
	var id string
	err := c.WithRun(ctx, "w1", protocol.RunOptions{}, func(r *protocol.AgentRun) error {
		id = r.RunID()
		_, err := r.Turn(ctx, protocol.Turn{Messages: []session.Value{session.Value(`"hi"`)}, ToolCalls: 2})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Run(ctx, api.RunRequest{RunID: id, SessionID: "w1"})
	if err != nil || rec.Run.Status != "completed" || rec.Run.ToolCallsCount != 2 {
		t.Fatalf("run after WithRun: %+v, %v", rec.Run, err)
	}
	boom := fmt.Errorf("boom")
	err = c.WithRun(ctx, "w2", protocol.RunOptions{}, func(r *protocol.AgentRun) error {
		if _, err := r.Turn(ctx, protocol.Turn{Messages: []session.Value{session.Value(`"one"`)}}); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("WithRun = %v, want boom", err)
	}
	r, err := c.StartRun(ctx, "w2", protocol.RunOptions{Resume: true})
	if err != nil || r.ResumedFrom() == "" || r.Turns() != 1 {
		t.Fatalf("resume after a failed function: %+v, %v", r, err)
	}
	if err := r.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	fresh, err := c.StartRun(ctx, "w2", protocol.RunOptions{Resume: true})
	if err != nil || fresh.ResumedFrom() != "" || fresh.Turns() != 0 {
		t.Fatalf("nothing to resume: %+v, %v", fresh, err)
	}
}
