package daemon_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// killHost SIGKILLs a cairnd and waits for it, as a host that dies.
func killHost(t *testing.T, p *proc) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// TestPostgresRunTakeover is a run moving between two hosts (two cairnd
// processes, two workspaces, one database) under leases: host A
// checkpoints three turns and dies; host B's resume is refused while A's
// lease is live, and taken over when the caller says A is gone, with the
// counters carried on; B checkpoints and completes; A, restarted on its
// workspace, is refused with not_owner, and the session shows nothing A
// tried to write.
func TestPostgresRunTakeover(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("takeover")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wsA, wsB := t.TempDir(), t.TempDir()
	a := startCairnd(t, wsA, "--store", url)
	ca := a.dial(t)
	if _, err := ca.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{}}); err != nil {
		t.Fatal(err)
	}
	run, err := ca.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "run-a"})
	if err != nil {
		t.Fatal(err)
	}
	checkpoint := func(c *protocol.Client, runID string, turn int64) error {
		_, err := c.Checkpoint(ctx, api.CheckpointRequest{RunID: runID, SessionID: "s", Turn: turn,
			NewMessages: []session.Value{session.Value(fmt.Sprintf(`{"turn":%d}`, turn))},
			Usage:       session.Usage{InputTokens: 10 * turn, TotalTokens: 10 * turn}, ToolCallsCount: turn})
		return err
	}
	for turn := int64(1); turn <= 3; turn++ {
		if err := checkpoint(ca, run.RunID, turn); err != nil {
			t.Fatalf("checkpoint %d on A: %v", turn, err)
		}
	}
	ca.Close()
	killHost(t, a)

	b := startCairnd(t, wsB, "--store", url)
	cb := b.dial(t)
	defer cb.Close()
	_, err = cb.ResumeRun(ctx, api.ResumeRunRequest{RunID: run.RunID, SessionID: "s"})
	if code := protocol.CodeOf(err); code != session.CodeConflict {
		t.Fatalf("resume on B while A's lease is live: %v (code %q), want conflict", err, code)
	}
	res, err := cb.ResumeRun(ctx, api.ResumeRunRequest{RunID: run.RunID, SessionID: "s", NewRunID: "run-b", Takeover: true})
	if err != nil {
		t.Fatalf("takeover on B: %v\n%s", err, b.logText())
	}
	if res.Turn != 3 || len(res.Messages) != 3 || res.Usage.TotalTokens != 30 || res.ToolCallsCount != 3 {
		t.Fatalf("resumed on B: turn %d, %d messages, usage %+v, tool calls %d", res.Turn, len(res.Messages), res.Usage, res.ToolCallsCount)
	}
	if err := checkpoint(cb, "run-b", 4); err != nil {
		t.Fatalf("checkpoint 4 on B: %v", err)
	}
	// The resume superseded run-a: its lease went with the resume's commit.
	st, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if l, err := st.LeaseOf(ctx, session.LeaseKeyRun(run.RunID)); session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("the superseded run's lease after B's resume: %+v, %v; want none", l, err)
	}
	if l, err := st.LeaseOf(ctx, session.LeaseKeyRun("run-b")); err != nil || l.Holder == "" {
		t.Fatalf("the new run's lease: %+v, %v", l, err)
	}

	// A comes back on its workspace and goes on where it was.
	a2 := startCairnd(t, wsA, "--store", url)
	ca2 := a2.dial(t)
	defer ca2.Close()
	err = checkpoint(ca2, run.RunID, 4)
	if code := protocol.CodeOf(err); code != session.CodeNotOwner {
		t.Fatalf("A's late checkpoint: %v (code %q), want not_owner", err, code)
	}
	_, err = ca2.CompleteRun(ctx, api.CompleteRunRequest{RunID: run.RunID, SessionID: "s", Status: session.RunCompleted})
	if code := protocol.CodeOf(err); code != session.CodeNotOwner {
		t.Fatalf("A's late completeRun: %v (code %q), want not_owner", err, code)
	}
	if _, err := cb.CompleteRun(ctx, api.CompleteRunRequest{RunID: "run-b", SessionID: "s", Status: session.RunCompleted}); err != nil {
		t.Fatalf("complete on B: %v", err)
	}
	m, err := cb.Messages(ctx, api.MessagesRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Total != 4 || string(m.Messages[3]) != `{"turn":4}` {
		t.Fatalf("session after the takeover: %d messages %s; want A's three and B's one", m.Total, m.Messages)
	}
}

// TestPostgresWorkflowTakeover is the same for a workflow: host B, taking
// it over from A that died after two steps, is told both are done and runs
// only the third; A restarted is refused with not_owner.
func TestPostgresWorkflowTakeover(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("wftakeover")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wsA, wsB := t.TempDir(), t.TempDir()
	steps := []api.StepSpec{{StepID: "fetch", Identity: "i1"}, {StepID: "build", Identity: "i2"}, {StepID: "ship", Identity: "i3"}}
	a := startCairnd(t, wsA, "--store", url)
	ca := a.dial(t)
	if _, err := ca.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	step := func(c *protocol.Client, s api.StepSpec) error {
		return c.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "w", StepID: s.StepID, Identity: s.Identity, Result: session.Value(`"` + s.StepID + `-done"`)})
	}
	for _, s := range steps[:2] {
		if err := step(ca, s); err != nil {
			t.Fatalf("step %s on A: %v", s.StepID, err)
		}
	}
	ca.Close()
	killHost(t, a)

	b := startCairnd(t, wsB, "--store", url)
	cb := b.dial(t)
	defer cb.Close()
	_, err := cb.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w", Steps: steps})
	if code := protocol.CodeOf(err); code != session.CodeConflict {
		t.Fatalf("begin on B while A's lease is live: %v (code %q), want conflict", err, code)
	}
	got, err := cb.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w", Steps: steps, Takeover: true})
	if err != nil {
		t.Fatalf("takeover on B: %v", err)
	}
	if len(got.Completed) != 2 || got.Completed[0].StepID != "fetch" || got.Completed[1].StepID != "build" {
		t.Fatalf("B is told %+v are done; want fetch and build", got.Completed)
	}
	if err := step(cb, steps[2]); err != nil {
		t.Fatalf("step ship on B: %v", err)
	}

	a2 := startCairnd(t, wsA, "--store", url)
	ca2 := a2.dial(t)
	defer ca2.Close()
	late := api.StepSpec{StepID: "ship", Identity: "i3"}
	if code := protocol.CodeOf(step(ca2, late)); code != session.CodeNotOwner {
		t.Fatalf("A's late step: code %q, want not_owner", code)
	}
	// A live host that loses its workflow to a takeover holds a token the
	// database no longer honours: only the check in the step's own
	// transaction stands between it and the workflow.
	if _, err := ca2.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w2", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	step2 := func(c *protocol.Client, s api.StepSpec) error {
		return c.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "w2", StepID: s.StepID, Identity: s.Identity, Result: session.Value(`1`)})
	}
	if err := step2(ca2, steps[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w2", Steps: steps, Takeover: true}); err != nil {
		t.Fatal(err)
	}
	if code := protocol.CodeOf(step2(ca2, steps[1])); code != session.CodeNotOwner {
		t.Fatalf("live A's step after B took w2 over: code %q, want not_owner", code)
	}
	if got, err := cb.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w2", Steps: steps}); err != nil || len(got.Completed) != 1 {
		t.Fatalf("w2 on B: %+v, %v; want only A's step before the takeover", got, err)
	}
	again, err := cb.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w", Steps: steps})
	if err != nil || len(again.Completed) != 3 || string(again.Completed[2].Result) != `"ship-done"` {
		t.Fatalf("workflow on B at the end: %+v, %v", again, err)
	}
}

// TestPostgresCleanStopReleases: a host that stops cleanly (SIGTERM) gives
// up its leases, so another host resumes its run without a takeover.
func TestPostgresCleanStopReleases(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("cleanstop")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := startCairnd(t, t.TempDir(), "--store", url)
	ca := a.dial(t)
	if _, err := ca.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Checkpoint(ctx, api.CheckpointRequest{RunID: "r", SessionID: "s", Turn: 1}); err != nil {
		t.Fatal(err)
	}
	ca.Close()
	a.cmd.Process.Signal(syscall.SIGTERM)
	<-a.done
	b := startCairnd(t, t.TempDir(), "--store", url)
	if _, err := b.dial(t).ResumeRun(ctx, api.ResumeRunRequest{RunID: "r", SessionID: "s"}); err != nil {
		t.Fatalf("resume after A stopped cleanly, without takeover: %v", err)
	}
}
