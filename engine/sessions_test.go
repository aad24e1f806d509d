package engine_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

func TestSave(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, e *engine.Engine) // may be nil
		req     api.SaveRequest
		code    session.Code
		wantGen uint64
	}{
		{name: "delta creates session", req: api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: msgs(`{"a":1}`)}}, wantGen: 1},
		{name: "snapshot creates session", req: api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{Messages: msgs(`1`)}}, wantGen: 1},
		{name: "snapshot with matching id", req: api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{SessionID: "s"}}, wantGen: 1},
		{name: "hostile id is just an id", req: api.SaveRequest{SessionID: "../x", Change: &session.Change{AppendMessages: msgs(`1`)}}, wantGen: 1},
		{name: "expect 0 on new session", req: api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: msgs(`1`)}, ExpectGeneration: session.Expect(0)}, wantGen: 1},
		{
			name: "expect current", setup: func(t *testing.T, e *engine.Engine) { saveDelta(t, e, "s", msg("u", 1)) },
			req: api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: msgs(`1`)}, ExpectGeneration: session.Expect(1)}, wantGen: 2,
		},
		{
			name: "expect stale delta", setup: func(t *testing.T, e *engine.Engine) {
				saveDelta(t, e, "s", msg("u", 1))
				saveDelta(t, e, "s", msg("u", 2))
			},
			req: api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: msgs(`1`)}, ExpectGeneration: session.Expect(1)}, code: session.CodeConflict,
		},
		{
			name: "expect stale snapshot", setup: func(t *testing.T, e *engine.Engine) { saveDelta(t, e, "s", msg("u", 1)) },
			req: api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{}, ExpectGeneration: session.Expect(0)}, code: session.CodeConflict,
		},
		{name: "expect on missing session", req: api.SaveRequest{SessionID: "s", Change: &session.Change{}, ExpectGeneration: session.Expect(3)}, code: session.CodeConflict},
		{name: "empty id", req: api.SaveRequest{Change: &session.Change{}}, code: session.CodeInvalidArgument},
		{name: "neither", req: api.SaveRequest{SessionID: "s"}, code: session.CodeInvalidArgument},
		{name: "both", req: api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{}, Change: &session.Change{}}, code: session.CodeInvalidArgument},
		{name: "snapshot of another id", req: api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{SessionID: "t"}}, code: session.CodeInvalidArgument},
		{name: "invalid message JSON", req: api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: msgs(`{"a":`)}}, code: session.CodeInvalidArgument},
		{name: "bad run status", req: api.SaveRequest{SessionID: "s", Change: &session.Change{UpsertRuns: []session.Run{{RunID: "r", Status: "walking"}}}}, code: session.CodeInvalidArgument},
		{name: "env value", req: api.SaveRequest{SessionID: "s", Change: &session.Change{Runtime: &session.Runtime{Processes: []session.Process{{Name: "p", EnvKeys: []string{"TOKEN=abc"}}}}}}, code: session.CodeInvalidArgument},
		{name: "future change schema", req: api.SaveRequest{SessionID: "s", Change: &session.Change{SchemaVersion: session.SchemaVersion + 1}}, code: session.CodeSchemaUnsupported},
		{name: "future snapshot schema", req: api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{SchemaVersion: session.SchemaVersion + 1}}, code: session.CodeSchemaUnsupported},
		{name: "checkpoint through save", req: api.SaveRequest{SessionID: "s", Change: &session.Change{Checkpoint: &session.LoopCheckpoint{RunID: "r"}}}, code: session.CodeInvalidArgument},
		{name: "drop checkpoints through save", req: api.SaveRequest{SessionID: "s", Change: &session.Change{DropCheckpoints: []string{"r"}}}, code: session.CodeInvalidArgument},
	}
	forEachStore(t, func(t *testing.T, f storeFactory) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newEngine(t, f)
				ctx := testkit.Context(t)
				if tc.setup != nil {
					tc.setup(t, e)
				}
				before, _ := e.List(ctx)
				res, err := e.Save(ctx, tc.req)
				wantCode(t, err, tc.code)
				if tc.code != "" {
					after, _ := e.List(ctx)
					if mustJSON(t, before) != mustJSON(t, after) {
						t.Fatalf("a failed save changed the store:\nbefore %s\nafter  %s", mustJSON(t, before), mustJSON(t, after))
					}
					return
				}
				if res.Generation != tc.wantGen {
					t.Fatalf("generation = %d, want %d", res.Generation, tc.wantGen)
				}
			})
		}
	})
}

func TestSaveDoesNotModifyRequest(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		agent := map[string]session.Value{"model": session.Value(`"m"`), "API_KEY": session.Value(`"sk"`)}
		c := &session.Change{Agent: agent}
		_, err := e.Save(testkit.Context(t), api.SaveRequest{SessionID: "s", Change: c})
		noErr(t, err)
		if len(agent) != 2 {
			t.Fatalf("Save scrubbed the caller's map: %v", agent)
		}
	})
}

func TestSecretKeysNeverStored(t *testing.T) {
	secrets := map[string]session.Value{
		"api_key": session.Value(`"sk-secret-1"`), "ApiKey": session.Value(`"sk-secret-2"`), "Authorization": session.Value(`"Bearer secret-3"`),
		"PASSWORD": session.Value(`"hunter2-secret-4"`), "secret": session.Value(`"secret-5"`), "Token": session.Value(`{"v":"secret-6"}`), "api-key": session.Value(`"secret-7"`),
		"OPENAI_API_KEY": session.Value(`"secret-8"`), "github_token": session.Value(`"secret-9"`), "aws_secret_access_key": session.Value(`"secret-10"`),
		"Auth-Token": session.Value(`"secret-11"`), "credentials": session.Value(`{"user":"u","pass":"secret-12"}`),
		"note": session.Value(`"deploy with ghp_4Nq8Lx2Vm9Wz7Kp1Rt3Ys6Bd0Fg5Jh2Ca8Ue4O"`),
	}
	withKeep := func() map[string]session.Value {
		m := map[string]session.Value{"keep": session.Value(`"yes"`)}
		for k, v := range secrets {
			m[k] = v
		}
		return m
	}
	forEachStore(t, func(t *testing.T, f storeFactory) {
		paths := []struct {
			name string
			do   func(t *testing.T, e *engine.Engine) string // returns the session to inspect
		}{
			{"delta", func(t *testing.T, e *engine.Engine) string {
				_, err := e.Save(testkit.Context(t), api.SaveRequest{SessionID: "s", Change: &session.Change{Agent: withKeep(), Metadata: withKeep()}})
				noErr(t, err)
				return "s"
			}},
			{"snapshot", func(t *testing.T, e *engine.Engine) string {
				_, err := e.Save(testkit.Context(t), api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{Agent: withKeep(), Metadata: withKeep()}})
				noErr(t, err)
				return "s"
			}},
			{"import bare", func(t *testing.T, e *engine.Engine) string {
				doc := mustJSON(t, &session.Snapshot{SessionID: "imp", Agent: withKeep(), Metadata: withKeep()})
				_, err := e.Import(testkit.Context(t), []byte(doc))
				noErr(t, err)
				return "imp"
			}},
			{"import envelope", func(t *testing.T, e *engine.Engine) string {
				doc := mustJSON(t, map[string]any{"schema_version": 1, "session": &session.Snapshot{SessionID: "imp", Agent: withKeep(), Metadata: withKeep()}})
				_, err := e.Import(testkit.Context(t), []byte(doc))
				noErr(t, err)
				return "imp"
			}},
		}
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				e := newEngine(t, f)
				sid := p.do(t, e)
				res, err := e.ResumeSession(testkit.Context(t), sid)
				noErr(t, err)
				for _, m := range []map[string]session.Value{res.Snapshot.Agent, res.Snapshot.Metadata} {
					if len(m) != 1 || string(m["keep"]) != `"yes"` {
						t.Fatalf("stored map = %v, want only keep", m)
					}
				}
				exp, err := e.Export(testkit.Context(t), sid)
				noErr(t, err)
				for _, v := range secrets {
					if bytes.Contains(exp, v) {
						t.Fatalf("export contains secret value %s", v)
					}
				}
			})
		}
	})
}

// TestForkDropsOldSecrets forks a session whose maps hold values the
// secret rules drop (as a session written before the rules grew does):
// the fork does not copy them, at the latest generation or an earlier one.
func TestForkDropsOldSecrets(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		for _, at := range []uint64{0, 1} {
			t.Run(fmt.Sprint("at ", at), func(t *testing.T) {
				st := openStore(t, f)
				e := engine.New(st, engine.Options{})
				t.Cleanup(func() { _ = e.Close() })
				old := &session.Snapshot{
					Agent:    map[string]session.Value{"model": session.Value(`"m-1"`), "OPENAI_API_KEY": session.Value(`"old-secret-1"`)},
					Metadata: map[string]session.Value{"ticket": session.Value(`7`), "github_token": session.Value(`"old-secret-2"`), "cfg": session.Value(`{"a":1,"access_token":"old-secret-3"}`)},
				}
				// Normalized: true writes it as an older cairn did, unscrubbed.
				if _, err := st.Commit(testkit.Context(t), "src", &session.Change{Replace: old}, session.CommitOptions{Normalized: true}); err != nil {
					t.Fatal(err)
				}
				if _, err := st.Commit(testkit.Context(t), "src", &session.Change{AppendMessages: msgs(`"m"`)}, session.CommitOptions{Normalized: true}); err != nil {
					t.Fatal(err)
				}
				_, err := e.Fork(testkit.Context(t), api.ForkRequest{SessionID: "src", NewID: "dst", AtGeneration: at})
				noErr(t, err)
				exp, err := e.Export(testkit.Context(t), "dst")
				noErr(t, err)
				for _, v := range []string{"old-secret-1", "old-secret-2", "old-secret-3"} {
					if bytes.Contains(exp, []byte(v)) {
						t.Errorf("fork holds %s", v)
					}
				}
				res, err := e.ResumeSession(testkit.Context(t), "dst")
				noErr(t, err)
				if got := mustJSON(t, res.Snapshot.Agent); got != `{"model":"m-1"}` {
					t.Errorf("fork agent = %s", got)
				}
				if got := mustJSON(t, res.Snapshot.Metadata); got != `{"cfg":{"a":1},"ticket":7}` {
					t.Errorf("fork metadata = %s", got)
				}
			})
		}
	})
}

// fullSnapshot is a session with every kind of record, with opaque values
// deliberately not in compact form.
func fullSnapshot() *session.Snapshot {
	ended := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	return &session.Snapshot{
		Workspace: &session.Workspace{Root: "/w", GitHead: "abc", GitBranch: "main", GitDirty: true},
		Agent:     map[string]session.Value{"model": session.Value(`"m-1"`), "cfg": session.Value("{ \"t\" :\t0.5 }")},
		Metadata:  map[string]session.Value{"ticket": session.Value(`{"a":  1}`)},
		Messages:  msgs(`{"a":  1}`, "{\n  \"role\": \"user\",\n  \"content\": \"<b>&amp;</b> \\u00e9\"\n}", `[1, 2,3 ]`, `"str"`, `12.50`, `{"big":12345678901234567890}`),
		Artifacts: []session.Artifact{
			{ID: "a1", Kind: "file", Name: "bin", MediaType: "application/octet-stream", RunID: "r1", Data: []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}},
			{ID: "a2", Kind: "patch", Path: "src/x.go"},
		},
		Traces: []session.Trace{
			{Seq: 1, Time: time.Date(2025, 1, 1, 0, 0, 0, 123456789, time.UTC), RunID: "r1", Type: "tool", Data: session.Value(`{ "cmd" : "ls" }`)},
			{Seq: 2, Time: time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC), Type: "note"},
		},
		Runs: []session.Run{
			{RunID: "r1", Status: session.RunCompleted, StartedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), EndedAt: &ended,
				Usage: session.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 30, Cost: 0.25}, ToolCallsCount: 3},
		},
		Verifications: []session.Verification{{ID: "v1", RunID: "r1", Summary: "ok", Checks: []session.Check{
			{Name: "test", Command: "go test ./...", Status: session.CheckPassed, Output: "ok"},
			{Name: "lint", Status: session.CheckNotRun},
		}}},
		SubagentTasks: []session.SubagentTask{{TaskID: "t1", Agent: "reviewer", Status: "done", Brief: "review", Result: session.Value(`{ "ok" : true }`), SessionID: "sub"}},
		Handoff: &session.Handoff{
			Done: []string{"a"}, InProgress: []string{"b"}, Verified: []string{"c"}, Unverified: []string{"d"},
			Restart:          &session.Restart{Workdir: "/w", Commands: []string{"make run"}, Config: []string{"PORT"}, HealthCheck: "curl localhost"},
			ReviewedVersion:  &session.ReviewedVersion{VCS: "git", Commit: "abc1234", DiffSHA256: "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff"},
			Risks:            []string{"r"},
			DecisionsPending: []string{"p"},
			NextStep:         &session.NextStep{Task: "t", DoneWhen: "w"},
		},
		Runtime: &session.Runtime{
			Processes: []session.Process{{Name: "web", Command: []string{"npm", "start"}, Cwd: "/w", EnvKeys: []string{"PORT", "DATABASE_URL"}, Port: 3000,
				HealthCheck: &session.HealthCheck{URL: "http://127.0.0.1:3000/", ExpectStatus: 200}}},
			Previews: []session.Preview{{URL: "http://127.0.0.1:3000/", Process: "web"}},
		},
		Files: &session.ManifestRef{ID: "m1", Clock: "c", Entries: 4},
	}
}

// sameContent compares every record of two snapshots, opaque values by
// their raw bytes.
func sameContent(t *testing.T, got, want *session.Snapshot) {
	t.Helper()
	if len(got.Messages) != len(want.Messages) {
		t.Fatalf("%d messages, want %d", len(got.Messages), len(want.Messages))
	}
	for i := range want.Messages {
		if !bytes.Equal(got.Messages[i], want.Messages[i]) {
			t.Fatalf("message %d = %q, want %q", i, got.Messages[i], want.Messages[i])
		}
	}
	rawEq := func(what string, a, b map[string]session.Value) {
		t.Helper()
		if len(a) != len(b) {
			t.Fatalf("%s: %v, want %v", what, a, b)
		}
		for k := range b {
			if !bytes.Equal(a[k], b[k]) {
				t.Fatalf("%s[%s] = %q, want %q", what, k, a[k], b[k])
			}
		}
	}
	rawEq("agent", got.Agent, want.Agent)
	rawEq("metadata", got.Metadata, want.Metadata)
	for i := range want.Traces {
		if !bytes.Equal(got.Traces[i].Data, want.Traces[i].Data) {
			t.Fatalf("trace %d data = %q, want %q", i, got.Traces[i].Data, want.Traces[i].Data)
		}
	}
	for i := range want.SubagentTasks {
		if !bytes.Equal(got.SubagentTasks[i].Result, want.SubagentTasks[i].Result) {
			t.Fatalf("subagent %d result = %q", i, got.SubagentTasks[i].Result)
		}
	}
	for i := range want.Artifacts {
		if !bytes.Equal(got.Artifacts[i].Data, want.Artifacts[i].Data) {
			t.Fatalf("artifact %d data = %v, want %v", i, got.Artifacts[i].Data, want.Artifacts[i].Data)
		}
	}
	type records struct {
		Workspace     *session.Workspace
		Artifacts     []session.Artifact
		Traces        []session.Trace
		Runs          []session.Run
		Verifications []session.Verification
		SubagentTasks []session.SubagentTask
		Handoff       *session.Handoff
		Runtime       *session.Runtime
		Files         *session.ManifestRef
	}
	pick := func(s *session.Snapshot) records {
		return records{s.Workspace, s.Artifacts, s.Traces, s.Runs, s.Verifications, s.SubagentTasks, s.Handoff, s.Runtime, s.Files}
	}
	if g, w := mustJSON(t, pick(got)), mustJSON(t, pick(want)); g != w {
		t.Fatalf("records differ:\ngot  %s\nwant %s", g, w)
	}
}

func TestRoundTripByteIdentical(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		want := fullSnapshot()
		// Normalize fills in digests; compare against the normalised form.
		norm := &session.Change{Replace: session.CloneSnapshot(want)}
		noErr(t, session.Normalize(norm))

		t.Run("snapshot", func(t *testing.T) {
			_, err := e.Save(ctx, api.SaveRequest{SessionID: "snap", Snapshot: want})
			noErr(t, err)
			got, err := e.ResumeSession(ctx, "snap")
			noErr(t, err)
			sameContent(t, got.Snapshot, norm.Replace)
		})
		t.Run("deltas", func(t *testing.T) {
			w := want
			for _, m := range w.Messages {
				_, err := e.Save(ctx, api.SaveRequest{SessionID: "delta", Change: &session.Change{AppendMessages: []session.Value{m}}})
				noErr(t, err)
			}
			_, err := e.Save(ctx, api.SaveRequest{SessionID: "delta", Change: &session.Change{
				Workspace: w.Workspace, Agent: w.Agent, Metadata: w.Metadata, AppendTraces: w.Traces, AppendArtifacts: w.Artifacts,
				UpsertRuns: w.Runs, UpsertVerifications: w.Verifications, UpsertSubagentTasks: w.SubagentTasks,
				Handoff: w.Handoff, Runtime: w.Runtime, Files: w.Files,
			}})
			noErr(t, err)
			got, err := e.ResumeSession(ctx, "delta")
			noErr(t, err)
			sameContent(t, got.Snapshot, norm.Replace)
		})
		t.Run("resave unchanged", func(t *testing.T) {
			first, err := e.ResumeSession(ctx, "snap")
			noErr(t, err)
			_, err = e.Save(ctx, api.SaveRequest{SessionID: "snap", Snapshot: first.Snapshot, ExpectGeneration: session.Expect(first.Generation)})
			noErr(t, err)
			second, err := e.ResumeSession(ctx, "snap")
			noErr(t, err)
			sameContent(t, second.Snapshot, first.Snapshot)
			if second.Generation != first.Generation+1 {
				t.Fatalf("generation %d after %d", second.Generation, first.Generation)
			}
		})
		t.Run("export import", func(t *testing.T) {
			doc, err := e.Export(ctx, "snap")
			noErr(t, err)
			noErr(t, e.Delete(ctx, "snap"))
			res, err := e.Import(ctx, doc)
			noErr(t, err)
			if res.SessionID != "snap" || res.Generation != 1 {
				t.Fatalf("import = %+v", res)
			}
			got, err := e.ResumeSession(ctx, "snap")
			noErr(t, err)
			sameContent(t, got.Snapshot, norm.Replace)
			// The document itself carries opaque values verbatim and
			// binary content as base64.
			for _, m := range want.Messages {
				if !bytes.Contains(doc, m) {
					t.Fatalf("export does not carry message %q verbatim", m)
				}
			}
			if !bytes.Contains(doc, []byte(`"data":"AAEC//4KAA=="`)) {
				t.Fatalf("export does not carry the artifact as base64: %s", doc)
			}
		})
	})
}

func TestResumeSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		_, err := e.ResumeSession(ctx, "nope")
		wantCode(t, err, session.CodeNotFound)
		_, err = e.ResumeSession(ctx, "")
		wantCode(t, err, session.CodeInvalidArgument)

		saveDelta(t, e, "s", msg("user", 0))
		r1, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
		noErr(t, err)
		r2, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
		noErr(t, err)
		r3, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
		noErr(t, err)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r1.RunID, Turn: 1, NewMessages: []session.Value{msg("a", 1)}, Usage: session.Usage{TotalTokens: 7}, ToolCallsCount: 2})
		noErr(t, err)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r3.RunID, Turn: 1, NewMessages: []session.Value{msg("a", 2)}})
		noErr(t, err)
		_, err = e.CompleteRun(ctx, api.CompleteRunRequest{RunID: r3.RunID, Status: session.RunCompleted})
		noErr(t, err)

		res, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		if res.Drift.Tracked {
			t.Fatal("drift claims to be tracked")
		}
		if res.Generation != res.Snapshot.Generation || res.Generation != 7 {
			t.Fatalf("generation %d / %d, want 7", res.Generation, res.Snapshot.Generation)
		}
		// r1: running with a checkpoint; r2: running, never checkpointed;
		// r3: completed.
		if len(res.InterruptedRuns) != 1 {
			t.Fatalf("interrupted runs = %+v, want only %s", res.InterruptedRuns, r1.RunID)
		}
		ir := res.InterruptedRuns[0]
		if ir.RunID != r1.RunID || ir.Status != session.RunRunning || ir.Turn != 1 || ir.MessageCount != 2 || ir.Usage.TotalTokens != 7 || ir.ToolCallsCount != 2 {
			t.Fatalf("interrupted run = %+v", ir)
		}
		_ = r2

		// After a resume whose successor has not checkpointed, the resumed
		// run is still listed, naming its successor.
		rr, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: r1.RunID})
		noErr(t, err)
		res, err = e.ResumeSession(ctx, "s")
		noErr(t, err)
		if len(res.InterruptedRuns) != 1 || res.InterruptedRuns[0].Status != session.RunInterrupted || res.InterruptedRuns[0].ResumedAs != rr.RunID {
			t.Fatalf("after resume: %+v", res.InterruptedRuns)
		}
	})
}

func TestListAndDelete(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		l, err := e.List(ctx)
		noErr(t, err)
		if l == nil || len(l) != 0 {
			t.Fatalf("empty list = %#v", l)
		}
		saveDelta(t, e, "b", msg("u", 1), msg("u", 2))
		saveDelta(t, e, "a", msg("u", 1))
		r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "b"})
		noErr(t, err)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 1, NewMessages: []session.Value{msg("a", 3)}})
		noErr(t, err)
		noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "wf-b", SessionID: "b", StepID: "s1", Identity: "i1"}))
		noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "wf-free", StepID: "s1", Identity: "i1"}))

		l, err = e.List(ctx)
		noErr(t, err)
		if len(l) != 2 || l[0].SessionID != "a" || l[1].SessionID != "b" {
			t.Fatalf("list = %+v", l)
		}
		b := l[1]
		if b.Generation != 3 || b.MessageCount != 3 || b.Runs[session.RunRunning] != 1 || b.Checkpoints != 1 {
			t.Fatalf("summary of b = %+v", b)
		}

		wantCode(t, e.Delete(ctx, "nope"), session.CodeNotFound)
		wantCode(t, e.Delete(ctx, ""), session.CodeInvalidArgument)
		noErr(t, e.Delete(ctx, "b"))
		wantCode(t, e.Delete(ctx, "b"), session.CodeNotFound)
		_, err = e.ResumeSession(ctx, "b")
		wantCode(t, err, session.CodeNotFound)
		// Cascade: the run's checkpoint and the owned workflow are gone;
		// the unowned workflow stays.
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: r.RunID})
		wantCode(t, err, session.CodeNoCheckpoint)
		got, err := e.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf-b", Steps: []api.StepSpec{{StepID: "s1", Identity: "i1"}}})
		noErr(t, err)
		if len(got.Completed) != 0 {
			t.Fatalf("owned workflow survived its session: %+v", got)
		}
		got, err = e.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf-free", Steps: []api.StepSpec{{StepID: "s1", Identity: "i1"}}})
		noErr(t, err)
		if len(got.Completed) != 1 {
			t.Fatalf("unowned workflow lost: %+v", got)
		}
		// The run id is free again.
		_, err = e.BeginRun(ctx, api.BeginRunRequest{SessionID: "a", RunID: r.RunID})
		noErr(t, err)
		l, err = e.List(ctx)
		noErr(t, err)
		if len(l) != 1 {
			t.Fatalf("list after delete = %+v", l)
		}
	})
}

func TestFork(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		saveDelta(t, e, "src", msg("u", 1))                              // gen 1
		saveDelta(t, e, "src", msg("u", 2))                              // gen 2
		r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "src"}) // gen 3
		noErr(t, err)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 1, NewMessages: []session.Value{msg("a", 3)}}) // gen 4
		noErr(t, err)
		saveDelta(t, e, "other", msg("u", 1))

		cases := []struct {
			name     string
			req      api.ForkRequest
			code     session.Code
			messages int
		}{
			{"latest", api.ForkRequest{SessionID: "src", NewID: "f-latest"}, "", 3},
			{"at generation", api.ForkRequest{SessionID: "src", NewID: "f-1", AtGeneration: 1}, "", 1},
			{"new id exists", api.ForkRequest{SessionID: "src", NewID: "other"}, session.CodeConflict, 0},
			{"onto itself", api.ForkRequest{SessionID: "src", NewID: "src"}, session.CodeConflict, 0},
			{"missing source", api.ForkRequest{SessionID: "nope", NewID: "f-x"}, session.CodeNotFound, 0},
			{"missing generation", api.ForkRequest{SessionID: "src", NewID: "f-y", AtGeneration: 99}, session.CodeNotFound, 0},
			{"empty new id", api.ForkRequest{SessionID: "src"}, session.CodeInvalidArgument, 0},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res, err := e.Fork(ctx, tc.req)
				wantCode(t, err, tc.code)
				if tc.code != "" {
					if tc.req.NewID == "other" {
						got, err := e.ResumeSession(ctx, "other")
						noErr(t, err)
						if len(got.Snapshot.Messages) != 1 || got.Generation != 1 {
							t.Fatal("a failed fork touched the existing session")
						}
					}
					return
				}
				if res.SessionID != tc.req.NewID || res.Generation != 1 {
					t.Fatalf("fork = %+v", res)
				}
				got, err := e.ResumeSession(ctx, tc.req.NewID)
				noErr(t, err)
				if len(got.Snapshot.Messages) != tc.messages {
					t.Fatalf("fork has %d messages, want %d", len(got.Snapshot.Messages), tc.messages)
				}
				if len(got.InterruptedRuns) != 0 {
					t.Fatalf("fork carries resumable runs: %+v", got.InterruptedRuns)
				}
				for _, run := range got.Snapshot.Runs {
					if run.Status == session.RunRunning {
						t.Fatalf("fork has a running run %+v", run)
					}
				}
			})
		}
		// The source's run still resolves to the source and keeps going.
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: 2, NewMessages: []session.Value{msg("a", 4)}})
		noErr(t, err)
		src, err := e.ResumeSession(ctx, "src")
		noErr(t, err)
		if len(src.Snapshot.Messages) != 4 || len(src.InterruptedRuns) != 1 {
			t.Fatalf("source after fork: %d messages, %+v", len(src.Snapshot.Messages), src.InterruptedRuns)
		}
		// Addressing the run through the fork: it records the run but has
		// no checkpoint for it.
		_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: r.RunID, SessionID: "f-latest"})
		wantCode(t, err, session.CodeNoCheckpoint)
		_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, SessionID: "f-latest", Turn: 3})
		wantCode(t, err, session.CodeConflict)
	})
}
