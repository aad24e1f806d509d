package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// wantCode fails the test unless err carries code.
func wantCode(t *testing.T, what string, err error, code session.Code) {
	t.Helper()
	if got := protocol.CodeOf(err); got != code {
		t.Fatalf("%s: code %q (%v), want %q", what, got, err, code)
	}
}

func must[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func val(s string) session.Value { return session.Value(s) }

// TestE2EEveryMethod drives every method of the protocol through a real
// cairnd, and every error code the real engine can produce.
func TestE2EEveryMethod(t *testing.T) {
	ws := workspace(t)
	p := startCairnd(t, ws, "--max-message-size", "65536")
	c := p.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	h := c.Hello()
	if h.Workspace != ws || h.PID != p.cmd.Process.Pid || h.ProtocolVersion != 1 || !h.Capabilities.Store.Durable || h.Limits.MaxMessageSize != 65536 {
		t.Fatalf("hello: %+v", h)
	}
	// The start-up probe's connection may not be counted out yet: the
	// daemon notices a closed connection on its own schedule.
	st := must[api.StatusResult](t, "status")(c.Status(ctx))
	for deadline := time.Now().Add(5 * time.Second); st.Connections != 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		st = must[api.StatusResult](t, "status")(c.Status(ctx))
	}
	if st.State != api.StateServing || st.Connections != 1 || st.Socket != p.sock {
		t.Fatalf("status: %+v", st)
	}

	// save: snapshot, delta, CAS conflict, invalid, future schema.
	snap := &session.Snapshot{SchemaVersion: 1, Messages: []session.Value{val(`{"role":"user","content":"hi"}`)},
		Agent: map[string]session.Value{"model": val(`"m1"`)}}
	r := must[api.SaveResult](t, "save snapshot")(c.Save(ctx, api.SaveRequest{SessionID: "s1", Snapshot: snap}))
	if r.Generation != 1 {
		t.Fatalf("first generation %d", r.Generation)
	}
	weird := val("{ \"keep\" :  [1,2, 3] }")
	r = must[api.SaveResult](t, "save change")(c.Save(ctx, api.SaveRequest{SessionID: "s1", ExpectGeneration: session.Expect(1),
		Change: &session.Change{AppendMessages: []session.Value{weird}}}))
	if r.Generation != 2 {
		t.Fatalf("second generation %d", r.Generation)
	}
	_, err := c.Save(ctx, api.SaveRequest{SessionID: "s1", ExpectGeneration: session.Expect(1), Change: &session.Change{AppendMessages: []session.Value{weird}}})
	wantCode(t, "stale expect_generation", err, session.CodeConflict)
	_, err = c.Save(ctx, api.SaveRequest{SessionID: "s1", Snapshot: snap, Change: &session.Change{}})
	wantCode(t, "snapshot and change", err, session.CodeInvalidArgument)
	_, err = c.Save(ctx, api.SaveRequest{SessionID: "s1", Change: &session.Change{AppendMessages: []session.Value{val(`{not json`)}}})
	wantCode(t, "invalid JSON value", err, session.CodeInvalidArgument)
	_, err = c.Save(ctx, api.SaveRequest{SessionID: "s1", Change: &session.Change{SchemaVersion: 99}})
	wantCode(t, "future schema", err, session.CodeSchemaUnsupported)
	_, err = c.Save(ctx, api.SaveRequest{SessionID: "", Change: &session.Change{}})
	wantCode(t, "empty id", err, session.CodeInvalidArgument)

	// resumeSession: values come back byte for byte.
	rs := must[*api.ResumeSessionResult](t, "resumeSession")(c.ResumeSession(ctx, "s1"))
	if rs.Generation != 2 || len(rs.Snapshot.Messages) != 2 || !bytes.Equal(rs.Snapshot.Messages[1], weird) || string(rs.Snapshot.Agent["model"]) != `"m1"` {
		t.Fatalf("resumeSession: gen %d messages %q", rs.Generation, rs.Snapshot.Messages)
	}
	_, err = c.ResumeSession(ctx, "nope")
	wantCode(t, "resume unknown", err, session.CodeNotFound)

	// runs: begin, checkpoint, resumeRun, completeRun.
	br := must[api.BeginRunResult](t, "beginRun")(c.BeginRun(ctx, api.BeginRunRequest{SessionID: "s1", RunID: "run1"}))
	if br.RunID != "run1" {
		t.Fatalf("beginRun: %+v", br)
	}
	_, err = c.BeginRun(ctx, api.BeginRunRequest{SessionID: "nope"})
	wantCode(t, "beginRun unknown session", err, session.CodeNotFound)
	_, err = c.BeginRun(ctx, api.BeginRunRequest{SessionID: "s1", RunID: "run1"})
	wantCode(t, "beginRun existing id", err, session.CodeConflict)
	state := val(`{"loop":"state","n":3}`)
	cp := must[api.CheckpointResult](t, "checkpoint")(c.Checkpoint(ctx, api.CheckpointRequest{RunID: "run1", Turn: 1,
		NewMessages: []session.Value{val(`{"role":"tool"}`)}, Usage: session.Usage{TotalTokens: 100, Cost: 0.5}, ToolCallsCount: 2, State: state}))
	if cp.MessageCount != 3 {
		t.Fatalf("checkpoint: %+v", cp)
	}
	_, err = c.Checkpoint(ctx, api.CheckpointRequest{RunID: "nope", Turn: 1})
	if code := protocol.CodeOf(err); code != session.CodeNotFound && code != session.CodeNoCheckpoint {
		t.Fatalf("checkpoint unknown run: %v", err)
	}
	rs = must[*api.ResumeSessionResult](t, "resumeSession")(c.ResumeSession(ctx, "s1"))
	if len(rs.InterruptedRuns) != 1 || rs.InterruptedRuns[0].RunID != "run1" || rs.InterruptedRuns[0].Turn != 1 {
		t.Fatalf("interrupted runs: %+v", rs.InterruptedRuns)
	}
	must[api.SaveResult](t, "save s2")(c.Save(ctx, msg("s2")))
	_, err = c.ResumeRun(ctx, api.ResumeRunRequest{RunID: "run1", SessionID: "s2"})
	wantCode(t, "resumeRun from another session", err, session.CodeNotOwner)
	rr := must[*api.ResumeRunResult](t, "resumeRun")(c.ResumeRun(ctx, api.ResumeRunRequest{RunID: "run1", NewRunID: "run2"}))
	if rr.RunID != "run2" || rr.ResumedFrom != "run1" || rr.Usage.TotalTokens != 100 || rr.ToolCallsCount != 2 || !bytes.Equal(rr.State, state) || len(rr.Messages) != 3 {
		t.Fatalf("resumeRun: %+v", rr)
	}
	must[api.CompleteRunResult](t, "completeRun")(c.CompleteRun(ctx, api.CompleteRunRequest{RunID: "run2", Status: session.RunCompleted}))
	_, err = c.CompleteRun(ctx, api.CompleteRunRequest{RunID: "run2", Status: "bogus"})
	wantCode(t, "completeRun bad status", err, session.CodeInvalidArgument)
	_, err = c.ResumeRun(ctx, api.ResumeRunRequest{RunID: "run2"})
	wantCode(t, "resumeRun completed", err, session.CodeNoCheckpoint)
	_, err = c.ResumeRun(ctx, api.ResumeRunRequest{RunID: "never"})
	wantCode(t, "resumeRun unknown", err, session.CodeNoCheckpoint)

	// workflows.
	steps := []api.StepSpec{{StepID: "a", Identity: "ia"}, {StepID: "b", Identity: "ib"}}
	bw := must[api.BeginWorkflowResult](t, "beginWorkflow")(c.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w", SessionID: "s1", Steps: steps}))
	if len(bw.Completed) != 0 {
		t.Fatalf("fresh workflow: %+v", bw)
	}
	if err := c.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "w", SessionID: "s1", StepID: "a", Identity: "ia", Result: val(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	bw = must[api.BeginWorkflowResult](t, "beginWorkflow again")(c.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w", SessionID: "s1", Steps: steps}))
	if len(bw.Completed) != 1 || string(bw.Completed[0].Result) != `{"ok":true}` {
		t.Fatalf("reopened workflow: %+v", bw)
	}
	_, err = c.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w", SessionID: "s1", Steps: []api.StepSpec{{StepID: "a", Identity: "changed"}}})
	wantCode(t, "changed identity", err, session.CodeStepIdentityChanged)
	if err := c.FinishWorkflow(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "finish twice", c.FinishWorkflow(ctx, "w"), session.CodeNotFound)

	// list, fork, export, import, delete.
	list := must[[]session.Summary](t, "list")(c.List(ctx))
	if len(list) != 2 || list[0].SessionID != "s1" || list[1].SessionID != "s2" {
		t.Fatalf("list: %+v", list)
	}
	fr := must[api.ForkResult](t, "fork")(c.Fork(ctx, api.ForkRequest{SessionID: "s1", NewID: "s1-fork", AtGeneration: 2}))
	if fr.SessionID != "s1-fork" {
		t.Fatalf("fork: %+v", fr)
	}
	_, err = c.Fork(ctx, api.ForkRequest{SessionID: "s1", NewID: "s2"})
	wantCode(t, "fork onto existing", err, session.CodeConflict)
	_, err = c.Fork(ctx, api.ForkRequest{SessionID: "nope", NewID: "x"})
	wantCode(t, "fork unknown", err, session.CodeNotFound)
	env := must[[]byte](t, "export")(c.Export(ctx, "s1"))
	if !json.Valid(env) {
		t.Fatalf("export is not JSON: %.100s", env)
	}
	_, err = c.Export(ctx, "nope")
	wantCode(t, "export unknown", err, session.CodeNotFound)
	_, err = c.Import(ctx, env)
	wantCode(t, "import existing", err, session.CodeConflict)
	if err := c.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "delete twice", c.Delete(ctx, "s1"), session.CodeNotFound)
	ir := must[api.ImportResult](t, "import")(c.Import(ctx, env))
	if ir.SessionID != "s1" {
		t.Fatalf("import: %+v", ir)
	}
	rs = must[*api.ResumeSessionResult](t, "resume imported")(c.ResumeSession(ctx, "s1"))
	if !bytes.Equal(rs.Snapshot.Messages[1], weird) {
		t.Fatalf("imported message changed: %q", rs.Snapshot.Messages[1])
	}
	_, err = c.Import(ctx, []byte(`{"schema_version": 99, "session_id": "future"}`))
	wantCode(t, "import future schema", err, session.CodeSchemaUnsupported)

	// too_large: each save fits the 64 KiB limit; the answer holding all of
	// them does not, and is replaced by a too_large error.
	big := val(`"` + strings.Repeat("x", 30000) + `"`)
	for i := range 3 {
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: "big", Change: &session.Change{AppendMessages: []session.Value{big}}}); err != nil {
			t.Fatalf("big save %d: %v", i, err)
		}
	}
	_, err = c.ResumeSession(ctx, "big")
	wantCode(t, "answer over the limit", err, session.CodeTooLarge)
	// A request over the limit is refused by the client, connection intact.
	_, err = c.Save(ctx, api.SaveRequest{SessionID: "big", Change: &session.Change{AppendMessages: []session.Value{val(`"` + strings.Repeat("y", 70000) + `"`)}}})
	if !errors.Is(err, protocol.ErrTooLarge) || protocol.CodeOf(err) != session.CodeTooLarge {
		t.Fatalf("request over the limit: %v", err)
	}

	// subscribe / unsubscribe.
	sub, err := c.Subscribe(ctx, api.EventSessionCommitted)
	if err != nil {
		t.Fatal(err)
	}
	must[api.SaveResult](t, "save")(c.Save(ctx, msg("s2")))
	select {
	case ev := <-sub.C:
		if ev.Type != api.EventSessionCommitted || ev.Data["session_id"] != "s2" || ev.Data["generation"] != uint64(2) {
			t.Fatalf("event: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := must[api.StatusResult](t, "status")(c.Status(ctx)); st.Subscribers != 0 {
		t.Fatalf("subscribers after unsubscribe: %d", st.Subscribers)
	}
	if st.Requests == 0 {
		t.Fatal("no requests counted")
	}
	wantCode(t, "unknown method", c.Call(ctx, "frobnicate", nil, nil), api.CodeMethodNotFound)
	wantCode(t, "wrong param type", c.Call(ctx, api.Delete.Name, map[string]any{"session_id": []int{1}}, nil), api.CodeBadRequest)
	t.Logf("codes covered on a real daemon; locked, internal and unavailable are covered in-process and by TestE2ESecondDaemon, no_space by TestE2EDiskFull (%s)", fmt.Sprint(len(session.Codes())))
}
