// Package storetest is the contract test suite every session.Store must
// pass. A store's own tests call Run with a factory.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/session"
)

// Factory makes stores for the suite.
type Factory struct {
	// New returns an empty store; the suite closes it.
	New func(t *testing.T) session.Store
	// Reopen closes s and opens the same store again, or is nil when the
	// store does not outlive its process (then the suite skips reopening).
	Reopen func(t *testing.T, s session.Store) session.Store
}

// Run runs the contract suite.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f Factory)
	}{
		{"RoundTripEveryObject", testRoundTrip},
		{"DeltaSemantics", testDelta},
		{"Generations", testGenerations},
		{"CompareAndSwap", testCAS},
		{"Checkpoints", testCheckpoints},
		{"DeleteCascade", testDeleteCascade},
		{"IDs", testIDs},
		{"RejectsBadInput", testBadInput},
		{"FutureSchema", testFutureSchema},
		{"Workflows", testWorkflows},
		{"List", testList},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, f) })
	}
}

var ctx = context.Background()

func open(t *testing.T, f Factory) session.Store {
	t.Helper()
	s := f.New(t)
	t.Cleanup(func() { s.Close() })
	return s
}

// reopen returns the store after a close and reopen when the store supports
// it, so every check below also runs against what was read back from disk.
func reopen(t *testing.T, f Factory, s session.Store) session.Store {
	t.Helper()
	if f.Reopen == nil {
		return s
	}
	s2 := f.Reopen(t, s)
	t.Cleanup(func() { s2.Close() })
	return s2
}

func mustCommit(t *testing.T, s session.Store, id string, c *session.Change, opts session.CommitOptions) session.CommitResult {
	t.Helper()
	res, err := s.Commit(ctx, id, c, opts)
	if err != nil {
		t.Fatalf("Commit(%q): %v", id, err)
	}
	return res
}

func mustLoad(t *testing.T, s session.Store, id string, at uint64) *session.State {
	t.Helper()
	st, err := s.Load(ctx, id, at)
	if err != nil {
		t.Fatalf("Load(%q, %d): %v", id, at, err)
	}
	return st
}

func wantCode(t *testing.T, err error, code session.Code) {
	t.Helper()
	if got := session.CodeOf(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}

// FullSnapshot returns a snapshot that uses every object and field,
// including non-compact JSON, unicode and binary artifact bytes.
func FullSnapshot() *session.Snapshot {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	end := t0.Add(time.Minute)
	bin := make([]byte, 1024)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	return &session.Snapshot{
		SchemaVersion: 1,
		CreatedAt:     t0,
		Workspace:     &session.Workspace{Root: "/w", GitHead: "abc123", GitBranch: "main", GitDirty: true},
		Agent:         map[string]session.Value{"harness": session.Value(`"h"`), "model": session.Value(`{"name": "m",  "v":2}`)},
		Metadata:      map[string]session.Value{"ticket": session.Value(`"T-1"`), "n": session.Value(`42`)},
		Messages: []session.Value{
			session.Value(`{"role":"user","content":"héllo ✓ 日本"}`),
			session.Value(`{ "role" : "assistant",  "content" : [1, 2.50, null] }`),
			session.Value(`"bare string"`),
		},
		Artifacts: []session.Artifact{
			{ID: "a1", Kind: "file", Name: "blob.bin", MediaType: "application/octet-stream", RunID: "r1", Data: bin},
			{ID: "a2", Kind: "path", Name: "main.go", Path: "cmd/main.go"},
		},
		Traces: []session.Trace{{Seq: 1, Time: t0, RunID: "r1", Type: "tool_call", Data: session.Value(`{"tool":"ls"}`)}},
		Runs: []session.Run{
			{RunID: "r1", Status: session.RunCompleted, StartedAt: t0, EndedAt: &end, Usage: session.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 30, Cost: 0.125}, ToolCallsCount: 3},
			{RunID: "r2", Status: session.RunRunning, ParentRunID: "r1", StartedAt: end},
		},
		Verifications: []session.Verification{{ID: "v1", RunID: "r1", Summary: "ok", Checks: []session.Check{
			{Name: "unit", Command: "go test ./...", Status: session.CheckPassed, Output: "ok"},
			{Name: "lint", Command: "make lint", Status: session.CheckNotRun},
		}}},
		SubagentTasks: []session.SubagentTask{{TaskID: "t1", Agent: "reviewer", Status: "done", Brief: "review", Result: session.Value(`{"ok":true}`), SessionID: "sub"}},
		Handoff: &session.Handoff{
			Done: []string{"x"}, InProgress: []string{"y"}, Verified: []string{"unit"}, Unverified: []string{"e2e"},
			Restart:         &session.Restart{Workdir: "/w", Commands: []string{"make run"}, Config: []string{"PORT"}, HealthCheck: "curl localhost"},
			ReviewedVersion: &session.ReviewedVersion{VCS: "git", Commit: "abc123", DiffSHA256: "00ff"},
			Risks:           []string{"r"}, DecisionsPending: []string{"d"},
			NextStep: &session.NextStep{Task: "ship", DoneWhen: "CI green"},
		},
		Runtime: &session.Runtime{
			Processes: []session.Process{{Name: "web", Command: []string{"npm", "run", "dev"}, Cwd: "/w", EnvKeys: []string{"PORT"}, Port: 3000,
				HealthCheck: &session.HealthCheck{URL: "http://127.0.0.1:3000/", ExpectStatus: 200}}},
			Previews: []session.Preview{{URL: "http://127.0.0.1:3000/", Process: "web"}},
		},
		Files: &session.ManifestRef{ID: "m1", Clock: "c:1", Entries: 12},
	}
}

// sameJSON compares two values through their JSON form (which keeps raw
// messages byte for byte).
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("%s differs:\n got %s\nwant %s", what, g, w)
	}
}

func sameMessages(t *testing.T, got, want []session.Value) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("message %d = %q, want %q (byte for byte)", i, got[i], want[i])
		}
	}
}

func testRoundTrip(t *testing.T, f Factory) {
	s := open(t, f)
	want := FullSnapshot()
	res := mustCommit(t, s, "s", &session.Change{Replace: session.CloneSnapshot(want)}, session.CommitOptions{})
	if res.Generation != 1 || res.MessageCount != 3 {
		t.Fatalf("commit = %+v, want generation 1 with 3 messages", res)
	}
	s = reopen(t, f, s)
	st := mustLoad(t, s, "s", 0)
	got := st.Snapshot
	if got.SessionID != "s" || got.Generation != 1 || got.SchemaVersion != 1 || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("header = %q gen %d schema %d created %v", got.SessionID, got.Generation, got.SchemaVersion, got.CreatedAt)
	}
	sameMessages(t, got.Messages, want.Messages)
	if !bytes.Equal(got.Artifacts[0].Data, want.Artifacts[0].Data) || got.Artifacts[0].Size != 1024 || len(got.Artifacts[0].SHA256) != 64 {
		t.Fatalf("binary artifact did not round trip: size %d sha %q", got.Artifacts[0].Size, got.Artifacts[0].SHA256)
	}
	want.Artifacts[0].SHA256, want.Artifacts[0].Size = got.Artifacts[0].SHA256, got.Artifacts[0].Size
	for _, part := range []struct {
		name      string
		got, want any
	}{
		{"workspace", got.Workspace, want.Workspace}, {"agent", got.Agent, want.Agent}, {"metadata", got.Metadata, want.Metadata},
		{"artifacts", got.Artifacts, want.Artifacts}, {"traces", got.Traces, want.Traces}, {"runs", got.Runs, want.Runs},
		{"verifications", got.Verifications, want.Verifications}, {"subagent tasks", got.SubagentTasks, want.SubagentTasks},
		{"handoff", got.Handoff, want.Handoff}, {"runtime", got.Runtime, want.Runtime}, {"files", got.Files, want.Files},
	} {
		sameJSON(t, part.name, part.got, part.want)
	}
	for k, v := range want.Agent {
		if !bytes.Equal(got.Agent[k], v) {
			t.Fatalf("agent %q = %q, want %q byte for byte", k, got.Agent[k], v)
		}
	}
}

func testDelta(t *testing.T, f Factory) {
	s := open(t, f)
	base := FullSnapshot()
	mustCommit(t, s, "d", &session.Change{Replace: session.CloneSnapshot(base)}, session.CommitOptions{})
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	delta := &session.Change{
		Workspace:           &session.Workspace{Root: "/w2"},
		Agent:               map[string]session.Value{"model": session.Value(`"m2"`)},
		Metadata:            map[string]session.Value{"ticket": session.Value(`null`), "new": session.Value(`[1]`), "Api-Key": session.Value(`"sk-secret"`)},
		AppendMessages:      []session.Value{session.Value(`{"m":4}`), session.Value(`{"m":5}`)},
		AppendTraces:        []session.Trace{{Seq: 2, Time: end, Type: "note"}},
		AppendArtifacts:     []session.Artifact{{ID: "a3", Data: []byte{0, 1, 2}}},
		UpsertRuns:          []session.Run{{RunID: "r2", Status: session.RunFailed, StartedAt: end, EndedAt: &end}, {RunID: "r3", Status: session.RunRunning, StartedAt: end}},
		UpsertVerifications: []session.Verification{{ID: "v1", Checks: []session.Check{{Name: "unit", Status: session.CheckFailed}}}},
		UpsertSubagentTasks: []session.SubagentTask{{TaskID: "t2", Status: "running"}},
		Handoff:             &session.Handoff{Done: []string{"all"}},
		Runtime:             &session.Runtime{},
		Files:               &session.ManifestRef{ID: "m2"},
	}
	mustCommit(t, s, "d", delta, session.CommitOptions{})
	s = reopen(t, f, s)
	got := mustLoad(t, s, "d", 0).Snapshot
	if got.Generation != 2 || len(got.Messages) != 5 || string(got.Messages[4]) != `{"m":5}` {
		t.Fatalf("after delta: generation %d, %d messages", got.Generation, len(got.Messages))
	}
	if got.Workspace.Root != "/w2" || string(got.Agent["model"]) != `"m2"` || got.Agent["harness"] != nil {
		t.Fatalf("workspace/agent not replaced: %+v %v", got.Workspace, got.Agent)
	}
	if _, ok := got.Metadata["ticket"]; ok || string(got.Metadata["new"]) != `[1]` || string(got.Metadata["n"]) != `42` {
		t.Fatalf("metadata merge wrong: %v", got.Metadata)
	}
	if _, ok := got.Metadata["Api-Key"]; ok {
		t.Fatalf("secret-named metadata key reached the store")
	}
	if len(got.Traces) != 2 || len(got.Artifacts) != 3 || got.Artifacts[2].Size != 3 {
		t.Fatalf("appends wrong: %d traces, %d artifacts", len(got.Traces), len(got.Artifacts))
	}
	if len(got.Runs) != 3 || got.Runs[1].RunID != "r2" || got.Runs[1].Status != session.RunFailed || got.Runs[2].RunID != "r3" {
		t.Fatalf("run upsert wrong: %+v", got.Runs)
	}
	if len(got.Verifications) != 1 || got.Verifications[0].Checks[0].Status != session.CheckFailed {
		t.Fatalf("verification upsert wrong: %+v", got.Verifications)
	}
	if len(got.SubagentTasks) != 2 || got.Handoff.Done[0] != "all" || got.Handoff.NextStep != nil || len(got.Runtime.Processes) != 0 || got.Files.ID != "m2" {
		t.Fatalf("replace fields wrong: tasks %d handoff %+v runtime %+v files %+v", len(got.SubagentTasks), got.Handoff, got.Runtime, got.Files)
	}
	// A whole-snapshot save after deltas replaces everything but keeps the
	// creation time.
	mustCommit(t, s, "d", &session.Change{Replace: &session.Snapshot{Messages: []session.Value{session.Value(`1`)}}}, session.CommitOptions{})
	got2 := mustLoad(t, s, "d", 0).Snapshot
	if got2.Generation != 3 || len(got2.Messages) != 1 || len(got2.Runs) != 0 || got2.Handoff != nil || !got2.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("replace after deltas: gen %d, %d messages, %d runs, created %v (was %v)", got2.Generation, len(got2.Messages), len(got2.Runs), got2.CreatedAt, got.CreatedAt)
	}
}

func testGenerations(t *testing.T, f Factory) {
	s := open(t, f)
	for i := 1; i <= 5; i++ {
		res := mustCommit(t, s, "g", &session.Change{AppendMessages: []session.Value{session.Value(fmt.Sprint(i))}}, session.CommitOptions{})
		if res.Generation != uint64(i) {
			t.Fatalf("commit %d got generation %d", i, res.Generation)
		}
	}
	s = reopen(t, f, s)
	for at := uint64(1); at <= 5; at++ {
		st := mustLoad(t, s, "g", at)
		if st.Snapshot.Generation != at || len(st.Snapshot.Messages) != int(at) {
			t.Fatalf("Load at %d: generation %d with %d messages", at, st.Snapshot.Generation, len(st.Snapshot.Messages))
		}
	}
	_, err := s.Load(ctx, "g", 6)
	wantCode(t, err, session.CodeNotFound)
	sum, err := s.Stat(ctx, "g")
	if err != nil || sum.Generation != 5 || sum.MessageCount != 5 {
		t.Fatalf("Stat = %+v, %v", sum, err)
	}
	_, err = s.Load(ctx, "missing", 0)
	wantCode(t, err, session.CodeNotFound)
	_, err = s.Stat(ctx, "missing")
	wantCode(t, err, session.CodeNotFound)
}

func testCAS(t *testing.T, f Factory) {
	s := open(t, f)
	msg := func(v string) *session.Change {
		return &session.Change{AppendMessages: []session.Value{session.Value(`"` + v + `"`)}}
	}
	_, err := s.Commit(ctx, "c", msg("x"), session.CommitOptions{ExpectGeneration: session.Expect(1)})
	wantCode(t, err, session.CodeConflict)
	for expect, v := range []string{"a", "b"} {
		if res := mustCommit(t, s, "c", msg(v), session.CommitOptions{ExpectGeneration: session.Expect(uint64(expect))}); res.Generation != uint64(expect)+1 {
			t.Fatalf("commit expecting generation %d landed at %d", expect, res.Generation)
		}
	}
	// A writer one generation behind, and one ahead, lose.
	_, err = s.Commit(ctx, "c", msg("lost"), session.CommitOptions{ExpectGeneration: session.Expect(1)})
	wantCode(t, err, session.CodeConflict)
	_, err = s.Commit(ctx, "c", msg("lost"), session.CommitOptions{ExpectGeneration: session.Expect(3)})
	wantCode(t, err, session.CodeConflict)
	_, err = s.Commit(ctx, "c", msg("lost"), session.CommitOptions{ExpectGeneration: session.Expect(1)})
	wantCode(t, err, session.CodeConflict)
	if !errors.Is(err, session.ErrConflict) {
		t.Fatalf("conflict does not match ErrConflict: %v", err)
	}
	_, err = s.Commit(ctx, "c", msg("lost"), session.CommitOptions{MustNotExist: true})
	wantCode(t, err, session.CodeConflict)
	testCASRace(t, s)
	s = reopen(t, f, s)
	st := mustLoad(t, s, "c", 0)
	if st.Snapshot.Generation != 2 || len(st.Snapshot.Messages) != 2 || string(st.Snapshot.Messages[1]) != `"b"` {
		t.Fatalf("after conflicts: generation %d, messages %q", st.Snapshot.Generation, st.Snapshot.Messages)
	}
	checkCASRace(t, s)
}

// testCASRace has writers race on session "race", each expecting the
// generation it last read. Each message names the generation its writer
// expected, so a winner that was stale shows in the log as well as in its
// result: every winner must land at exactly its expected generation + 1.
func testCASRace(t *testing.T, s session.Store) {
	const writers, tries = 6, 15
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tries {
				var cur uint64
				if sum, err := s.Stat(ctx, "race"); err == nil {
					cur = sum.Generation
				}
				runtime.Gosched() // let others commit: stale writers must occur
				c := &session.Change{AppendMessages: []session.Value{session.Value(fmt.Sprintf(`{"w":%d,"i":%d,"expected":%d}`, w, i, cur))}}
				res, err := s.Commit(ctx, "race", c, session.CommitOptions{ExpectGeneration: session.Expect(cur)})
				switch {
				case err == nil && res.Generation != cur+1:
					t.Errorf("commit expecting generation %d landed at %d", cur, res.Generation)
				case err != nil && session.CodeOf(err) != session.CodeConflict:
					t.Errorf("commit expecting generation %d: %v", cur, err)
				}
			}
		}()
	}
	wg.Wait()
	checkCASRace(t, s)
}

// checkCASRace checks that the message of each generation g of "race" was
// written by a writer that expected g-1.
func checkCASRace(t *testing.T, s session.Store) {
	t.Helper()
	st := mustLoad(t, s, "race", 0)
	if st.Snapshot.Generation != uint64(len(st.Snapshot.Messages)) {
		t.Fatalf("race: generation %d with %d messages", st.Snapshot.Generation, len(st.Snapshot.Messages))
	}
	for i, m := range st.Snapshot.Messages {
		var v struct{ Expected uint64 }
		if err := json.Unmarshal(m, &v); err != nil || v.Expected != uint64(i) {
			t.Fatalf("race: generation %d holds %s, written by a writer that expected %d", i+1, m, v.Expected)
		}
	}
}

func testCheckpoints(t *testing.T, f Factory) {
	s := open(t, f)
	mustCommit(t, s, "k", &session.Change{UpsertRuns: []session.Run{{RunID: "run-1", Status: session.RunRunning}}}, session.CommitOptions{})
	res := mustCommit(t, s, "k", &session.Change{
		AppendMessages: []session.Value{session.Value(`"t1"`), session.Value(`"t1b"`)},
		Checkpoint:     &session.LoopCheckpoint{RunID: "run-1", Turn: 1, Usage: session.Usage{TotalTokens: 7}, ToolCallsCount: 2, State: session.Value(`{"step": 1}`)},
	}, session.CommitOptions{})
	if res.MessageCount != 2 {
		t.Fatalf("message count = %d", res.MessageCount)
	}
	mustCommit(t, s, "k", &session.Change{AppendMessages: []session.Value{session.Value(`"after"`)}}, session.CommitOptions{})
	s = reopen(t, f, s)
	cp, err := s.Checkpoint(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if cp.SessionID != "k" || cp.Turn != 1 || cp.MessageCount != 2 || cp.Usage.TotalTokens != 7 || cp.ToolCallsCount != 2 || string(cp.State) != `{"step": 1}` {
		t.Fatalf("checkpoint = %+v", cp)
	}
	if id, err := s.FindRun(ctx, "run-1"); err != nil || id != "k" {
		t.Fatalf("FindRun = %q, %v", id, err)
	}
	st := mustLoad(t, s, "k", 0)
	if st.Checkpoints["run-1"] == nil || st.Checkpoints["run-1"].MessageCount != 2 {
		t.Fatalf("Load checkpoints = %+v", st.Checkpoints)
	}
	if old := mustLoad(t, s, "k", 1); len(old.Checkpoints) != 0 {
		t.Fatalf("generation 1 should have no checkpoint, has %d", len(old.Checkpoints))
	}
	if sum, _ := s.Stat(ctx, "k"); sum.Checkpoints != 1 || sum.Runs[session.RunRunning] != 1 {
		t.Fatalf("Stat = %+v", sum)
	}
	mustCommit(t, s, "k", &session.Change{UpsertRuns: []session.Run{{RunID: "run-1", Status: session.RunCompleted}}, DropCheckpoints: []string{"run-1"}}, session.CommitOptions{})
	s = reopen(t, f, s)
	_, err = s.Checkpoint(ctx, "run-1")
	wantCode(t, err, session.CodeNoCheckpoint)
	_, err = s.FindRun(ctx, "nope")
	wantCode(t, err, session.CodeNotFound)
	_, err = s.Checkpoint(ctx, "nope")
	wantCode(t, err, session.CodeNoCheckpoint)
}

func testDeleteCascade(t *testing.T, f Factory) {
	s := open(t, f)
	mustCommit(t, s, "del", &session.Change{
		AppendMessages: []session.Value{session.Value(`1`)},
		Checkpoint:     &session.LoopCheckpoint{RunID: "del-run", Turn: 1},
	}, session.CommitOptions{})
	mustCommit(t, s, "keep", &session.Change{AppendMessages: []session.Value{session.Value(`1`)}}, session.CommitOptions{})
	step := session.StepRecord{StepID: "s1", Identity: "i1", Result: session.Value(`1`)}
	if err := s.SaveStep(ctx, "wf-owned", "del", step); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStep(ctx, "wf-free", "", step); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "del"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.Delete(ctx, "del"), session.CodeNotFound)
	s = reopen(t, f, s)
	_, err := s.Load(ctx, "del", 0)
	wantCode(t, err, session.CodeNotFound)
	_, err = s.Checkpoint(ctx, "del-run")
	wantCode(t, err, session.CodeNoCheckpoint)
	_, err = s.Workflow(ctx, "wf-owned")
	wantCode(t, err, session.CodeNotFound)
	if _, err := s.Workflow(ctx, "wf-free"); err != nil {
		t.Fatalf("unowned workflow was deleted: %v", err)
	}
	mustLoad(t, s, "keep", 0)
	// The id can be used again, from generation 1.
	if res := mustCommit(t, s, "del", &session.Change{}, session.CommitOptions{ExpectGeneration: session.Expect(0)}); res.Generation != 1 {
		t.Fatalf("recreated session at generation %d", res.Generation)
	}
	if st := mustLoad(t, s, "del", 0); len(st.Snapshot.Messages) != 0 || len(st.Checkpoints) != 0 {
		t.Fatalf("recreated session kept old content")
	}
}

// HostileIDs are valid ids that a store must keep apart and inside itself.
var HostileIDs = []string{
	"release-review", "feature/x", "../x", "..", ".", "a/../../b", "/abs", "日本語-セッション", "emoji-🪨",
	"a%2Fb", "a/b", "a b", ".hidden", "-", "CON", strings.Repeat("x", 256), strings.Repeat("é", 128),
	strings.Repeat("/", 256), "s-x.log", ".tmp-x", ".del-x", `back\slash`, "new\nline",
}

func testIDs(t *testing.T, f Factory) {
	s := open(t, f)
	for i, id := range HostileIDs {
		mustCommit(t, s, id, &session.Change{AppendMessages: []session.Value{session.Value(fmt.Sprint(i))}}, session.CommitOptions{})
	}
	s = reopen(t, f, s)
	for i, id := range HostileIDs {
		st := mustLoad(t, s, id, 0)
		if st.Snapshot.SessionID != id || string(st.Snapshot.Messages[0]) != fmt.Sprint(i) {
			t.Fatalf("id %q read back as %q with %q", id, st.Snapshot.SessionID, st.Snapshot.Messages[0])
		}
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != len(HostileIDs) {
		t.Fatalf("List = %d sessions, %v; want %d", len(list), err, len(HostileIDs))
	}
	for _, bad := range []string{"", "nul\x00byte", strings.Repeat("x", 257), "bad\xffutf8"} {
		_, err := s.Commit(ctx, bad, &session.Change{}, session.CommitOptions{})
		wantCode(t, err, session.CodeInvalidArgument)
		_, err = s.Load(ctx, bad, 0)
		wantCode(t, err, session.CodeInvalidArgument)
		wantCode(t, s.SaveStep(ctx, bad, "", session.StepRecord{StepID: "a", Identity: "b"}), session.CodeInvalidArgument)
	}
}

func testBadInput(t *testing.T, f Factory) {
	s := open(t, f)
	mustCommit(t, s, "b", &session.Change{AppendMessages: []session.Value{session.Value(`1`)}}, session.CommitOptions{})
	bad := []*session.Change{
		{AppendMessages: []session.Value{session.Value(`{not json`)}},
		{AppendMessages: []session.Value{nil}},
		{UpsertRuns: []session.Run{{RunID: "r", Status: "sleeping"}}},
		{UpsertRuns: []session.Run{{RunID: "r", Status: "running"}, {RunID: "r", Status: "running"}}},
		{UpsertRuns: []session.Run{{RunID: "", Status: "running"}}},
		{UpsertVerifications: []session.Verification{{ID: "v", Checks: []session.Check{{Name: "c", Status: "green"}}}}},
		{AppendArtifacts: []session.Artifact{{ID: "a", Data: []byte("x"), SHA256: strings.Repeat("0", 64)}}},
		{Runtime: &session.Runtime{Processes: []session.Process{{Name: "p", EnvKeys: []string{"TOKEN=abc"}}}}},
		{Replace: &session.Snapshot{}, AppendMessages: []session.Value{session.Value(`1`)}},
		{Checkpoint: &session.LoopCheckpoint{RunID: "r", Turn: -1}},
		{Metadata: map[string]session.Value{"k": session.Value(`nope`)}},
	}
	for i, c := range bad {
		_, err := s.Commit(ctx, "b", c, session.CommitOptions{})
		if session.CodeOf(err) != session.CodeInvalidArgument {
			t.Fatalf("bad change %d: error %v, want invalid_argument", i, err)
		}
	}
	if st := mustLoad(t, s, "b", 0); st.Snapshot.Generation != 1 {
		t.Fatalf("a rejected change was written: generation %d", st.Snapshot.Generation)
	}
}

func testFutureSchema(t *testing.T, f Factory) {
	s := open(t, f)
	mustCommit(t, s, "f", &session.Change{}, session.CommitOptions{})
	_, err := s.Commit(ctx, "f", &session.Change{SchemaVersion: session.SchemaVersion + 1}, session.CommitOptions{})
	wantCode(t, err, session.CodeSchemaUnsupported)
	_, err = s.Commit(ctx, "f", &session.Change{Replace: &session.Snapshot{SchemaVersion: session.SchemaVersion + 1}}, session.CommitOptions{})
	wantCode(t, err, session.CodeSchemaUnsupported)
	_, err = s.Commit(ctx, "new", &session.Change{Replace: &session.Snapshot{SchemaVersion: 99}}, session.CommitOptions{})
	wantCode(t, err, session.CodeSchemaUnsupported)
	if st := mustLoad(t, s, "f", 0); st.Snapshot.Generation != 1 {
		t.Fatalf("future schema was written: generation %d", st.Snapshot.Generation)
	}
	_, err = s.Load(ctx, "new", 0)
	wantCode(t, err, session.CodeNotFound)
}

func testWorkflows(t *testing.T, f Factory) {
	s := open(t, f)
	_, err := s.Workflow(ctx, "w")
	wantCode(t, err, session.CodeNotFound)
	for i, st := range []session.StepRecord{
		{StepID: "a", Identity: "ia", Result: session.Value(`{"r": "a"}`)},
		{StepID: "b", Identity: "ib"},
		{StepID: "a", Identity: "ia2", Result: session.Value(`2`)},
	} {
		if err := s.SaveStep(ctx, "w", "owner", st); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	wantCode(t, s.SaveStep(ctx, "w", "", session.StepRecord{StepID: "c"}), session.CodeInvalidArgument)
	wantCode(t, s.SaveStep(ctx, "w", "", session.StepRecord{StepID: "c", Identity: "x", Result: session.Value(`{`)}), session.CodeInvalidArgument)
	s = reopen(t, f, s)
	w, err := s.Workflow(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if w.WorkflowID != "w" || w.SessionID != "owner" || len(w.Steps) != 2 || w.Steps[0].Identity != "ia2" || string(w.Steps[0].Result) != `2` || w.Steps[1].StepID != "b" || w.Steps[0].CompletedAt.IsZero() {
		t.Fatalf("workflow = %+v", w)
	}
	if err := s.DeleteWorkflow(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteWorkflow(ctx, "w"), session.CodeNotFound)
	s = reopen(t, f, s)
	_, err = s.Workflow(ctx, "w")
	wantCode(t, err, session.CodeNotFound)
}

func testList(t *testing.T, f Factory) {
	s := open(t, f)
	if l, err := s.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("empty List = %v, %v", l, err)
	}
	for _, id := range []string{"b", "a", "c"} {
		mustCommit(t, s, id, &session.Change{
			AppendMessages: []session.Value{session.Value(`1`), session.Value(`2`)},
			UpsertRuns:     []session.Run{{RunID: id + "-r1", Status: session.RunCompleted}, {RunID: id + "-r2", Status: session.RunRunning}},
		}, session.CommitOptions{})
	}
	mustCommit(t, s, "a", &session.Change{}, session.CommitOptions{})
	s = reopen(t, f, s)
	l, err := s.List(ctx)
	if err != nil || len(l) != 3 {
		t.Fatalf("List = %v, %v", l, err)
	}
	if l[0].SessionID != "a" || l[1].SessionID != "b" || l[2].SessionID != "c" {
		t.Fatalf("List order: %s %s %s", l[0].SessionID, l[1].SessionID, l[2].SessionID)
	}
	if l[0].Generation != 2 || l[0].MessageCount != 2 || l[0].Runs[session.RunCompleted] != 1 || l[0].Runs[session.RunRunning] != 1 || l[0].UpdatedAt.Before(l[0].CreatedAt) {
		t.Fatalf("List[0] = %+v", l[0])
	}
}
