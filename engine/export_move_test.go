package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// fsEngine opens an engine over a fresh fsstore workspace of its own.
func fsEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := fsstore.Open(t.TempDir(), fsstore.Options{})
	noErr(t, err)
	e := engine.New(st, engine.Options{})
	t.Cleanup(func() { _ = e.Close() })
	return e
}

var moveSteps = []api.StepSpec{{StepID: "fetch", Identity: "id-fetch"}, {StepID: "build", Identity: "id-build"}, {StepID: "test", Identity: "id-test"}}

// stoppedMidway builds, in e, session "moving" with a run left running
// after two checkpoints and a workflow with two of its three steps done,
// and returns the run id.
func stoppedMidway(t *testing.T, ctx context.Context, e *engine.Engine) string {
	t.Helper()
	saveDelta(t, e, "moving", msg("user", 1))
	r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "moving"})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 1, NewMessages: []session.Value{msg("assistant", 2)},
		Usage: session.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, Cost: 0.25}, ToolCallsCount: 1, State: session.Value(`{"node": "plan",  "i": 1}`)})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 2, NewMessages: []session.Value{msg("tool", 3), msg("assistant", 4)},
		Usage: session.Usage{InputTokens: 30, OutputTokens: 12, TotalTokens: 42, Cost: 0.5}, ToolCallsCount: 3, State: session.Value(`{"node": "act",  "i": 2}`)})
	noErr(t, err)
	// A message after the last checkpoint: resuming drops it.
	saveDelta(t, e, "moving", msg("assistant", 5))
	for _, s := range moveSteps[:2] {
		noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "wf-move", SessionID: "moving", StepID: s.StepID, Identity: s.Identity,
			Result: session.Value(`{"step":  "` + s.StepID + `"}`)}))
	}
	return r.RunID
}

// continuesWhereStopped checks that, in e, the run and the workflow that
// stoppedMidway left continue from where they stopped.
func continuesWhereStopped(t *testing.T, ctx context.Context, e *engine.Engine, runID string) {
	t.Helper()
	res, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: runID})
	noErr(t, err)
	if res.ResumedFrom != runID || res.SessionID != "moving" || res.Turn != 2 || res.ToolCallsCount != 3 ||
		res.Usage != (session.Usage{InputTokens: 30, OutputTokens: 12, TotalTokens: 42, Cost: 0.5}) {
		t.Fatalf("resumed run = %+v", res)
	}
	if string(res.State) != `{"node": "act",  "i": 2}` {
		t.Fatalf("resumed state = %s, want the checkpoint's bytes", res.State)
	}
	if len(res.Messages) != 4 || string(res.Messages[3]) != string(msg("assistant", 4)) {
		t.Fatalf("resumed messages = %s, want the 4 up to the checkpoint", res.Messages)
	}
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: res.RunID, Turn: 3, NewMessages: []session.Value{msg("assistant", 6)},
		Usage: session.Usage{InputTokens: 40, TotalTokens: 40}, ToolCallsCount: 4})
	noErr(t, err)
	begun, err := e.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf-move", SessionID: "moving", Steps: moveSteps})
	noErr(t, err)
	if len(begun.Completed) != 2 || begun.Completed[0].StepID != "fetch" || begun.Completed[1].StepID != "build" ||
		string(begun.Completed[1].Result) != `{"step":  "build"}` {
		t.Fatalf("completed steps after the move = %+v", begun.Completed)
	}
	noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "wf-move", SessionID: "moving", StepID: "test", Identity: "id-test"}))
}

// TestExportMovesRunsAndWorkflows moves a session with a run left running
// and a half-done workflow from one workspace to another, by export and by
// exportFile, and continues both there.
func TestExportMovesRunsAndWorkflows(t *testing.T) {
	ctx := testkit.Context(t)
	src := fsEngine(t)
	runID := stoppedMidway(t, ctx, src)
	env, err := src.Export(ctx, "moving")
	noErr(t, err)
	path := filepath.Join(t.TempDir(), "moving.json")
	res, err := src.ExportFile(ctx, api.ExportFileRequest{SessionID: "moving", Path: path})
	noErr(t, err)
	file, err := os.ReadFile(path)
	noErr(t, err)
	if !bytes.Equal(file, env) || res.Bytes != int64(len(file)) || res.Path != path || res.Generation == 0 {
		t.Fatalf("exportFile wrote %d bytes (%+v), export returned %d: they must be the same envelope", len(file), res, len(env))
	}
	if !bytes.Contains(env, []byte(`"checkpoints":[`)) || !bytes.Contains(env, []byte(`"workflows":[`)) {
		t.Fatalf("envelope carries no checkpoints or workflows: %s", env)
	}

	t.Run("import", func(t *testing.T) {
		dst := fsEngine(t)
		got, err := dst.Import(ctx, env)
		noErr(t, err)
		if got.SessionID != "moving" || got.Generation != 1 {
			t.Fatalf("import = %+v", got)
		}
		continuesWhereStopped(t, ctx, dst, runID)
	})
	t.Run("importFile", func(t *testing.T) {
		dst := fsEngine(t)
		_, err := dst.ImportFile(ctx, api.ImportFileRequest{Path: path})
		noErr(t, err)
		continuesWhereStopped(t, ctx, dst, runID)
	})
	t.Run("export again gives the same envelope", func(t *testing.T) {
		dst := fsEngine(t)
		_, err := dst.Import(ctx, env)
		noErr(t, err)
		again, err := dst.Export(ctx, "moving")
		noErr(t, err)
		// Generations and updated_at are the importing store's; the rest,
		// checkpoints and workflows included, comes back as it went.
		var a, b api.Envelope
		noErr(t, json.Unmarshal(env, &a))
		noErr(t, json.Unmarshal(again, &b))
		if mustJSON(t, a.Checkpoints) != mustJSON(t, b.Checkpoints) || mustJSON(t, a.Workflows) != mustJSON(t, b.Workflows) {
			t.Fatalf("checkpoints or workflows changed through import:\n%s\n%s", env, again)
		}
	})
}

// TestImportWorkflowsFirst: import writes the workflows before the session,
// so an import that crashed in between completes when run again, and a
// workflow id another session owns is refused before anything is written.
func TestImportWorkflowsFirst(t *testing.T) {
	ctx := testkit.Context(t)
	src := fsEngine(t)
	runID := stoppedMidway(t, ctx, src)
	env, err := src.Export(ctx, "moving")
	noErr(t, err)
	var parsed api.Envelope
	noErr(t, json.Unmarshal(env, &parsed))

	t.Run("retry after a crash between workflows and session", func(t *testing.T) {
		dir := t.TempDir()
		st, err := fsstore.Open(dir, fsstore.Options{})
		noErr(t, err)
		// What a crashed import left: the workflow, no session.
		for _, step := range parsed.Workflows[0].Steps {
			noErr(t, st.SaveStep(ctx, "wf-move", "moving", step))
		}
		noErr(t, st.Close())
		st, err = fsstore.Open(dir, fsstore.Options{})
		noErr(t, err)
		dst := engine.New(st, engine.Options{})
		t.Cleanup(func() { _ = dst.Close() })
		_, err = dst.Import(ctx, env)
		noErr(t, err)
		continuesWhereStopped(t, ctx, dst, runID)
	})
	t.Run("workflow owned by another session", func(t *testing.T) {
		dst := fsEngine(t)
		saveDelta(t, dst, "owner", msg("user", 1))
		noErr(t, dst.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "wf-move", SessionID: "owner", StepID: "fetch", Identity: "other"}))
		_, err := dst.Import(ctx, env)
		wantCode(t, err, session.CodeConflict)
		_, err = dst.ResumeSession(ctx, "moving")
		wantCode(t, err, session.CodeNotFound)
		begun, err := dst.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf-move", SessionID: "owner", Steps: []api.StepSpec{{StepID: "fetch", Identity: "other"}, {StepID: "build", Identity: "id-build"}}})
		noErr(t, err)
		if len(begun.Completed) != 1 {
			t.Fatalf("a refused import touched the other session's workflow: %+v", begun.Completed)
		}
	})
	t.Run("session exists", func(t *testing.T) {
		dst := fsEngine(t)
		saveDelta(t, dst, "moving", msg("user", 1))
		_, err := dst.Import(ctx, env)
		wantCode(t, err, session.CodeConflict)
		_, err = dst.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf-move", Steps: moveSteps})
		noErr(t, err)
		w, err := dst.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf-move", Steps: moveSteps})
		noErr(t, err)
		if len(w.Completed) != 0 {
			t.Fatalf("a refused import wrote the workflow: %+v", w.Completed)
		}
	})
	t.Run("restored checkpoint past the messages", func(t *testing.T) {
		bad := parsed
		cps := append([]session.LoopCheckpoint{}, bad.Checkpoints...)
		cps[0].MessageCount = 99
		bad.Checkpoints = cps
		dst := fsEngine(t)
		_, err := dst.Import(ctx, []byte(mustJSON(t, bad)))
		wantCode(t, err, session.CodeInvalidArgument)
	})
}

// TestExportFilePaths: exportFile and importFile take absolute paths only,
// and a failed export leaves no file.
func TestExportFilePaths(t *testing.T) {
	ctx := testkit.Context(t)
	e := fsEngine(t)
	saveDelta(t, e, "s", msg("user", 1))
	_, err := e.ExportFile(ctx, api.ExportFileRequest{SessionID: "s", Path: "relative.json"})
	wantCode(t, err, session.CodeInvalidArgument)
	_, err = e.ImportFile(ctx, api.ImportFileRequest{Path: "relative.json"})
	wantCode(t, err, session.CodeInvalidArgument)
	dir := t.TempDir()
	_, err = e.ExportFile(ctx, api.ExportFileRequest{SessionID: "missing", Path: filepath.Join(dir, "m.json")})
	wantCode(t, err, session.CodeNotFound)
	_, err = e.ImportFile(ctx, api.ImportFileRequest{Path: filepath.Join(dir, "m.json")})
	wantCode(t, err, session.CodeNotFound)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a failed export left %v", left)
	}
}
