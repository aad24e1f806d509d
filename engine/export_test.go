package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

func TestExportEnvelopeShape(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: fullSnapshot()})
		noErr(t, err)
		doc, err := e.Export(ctx, "s")
		noErr(t, err)
		var top map[string]json.RawMessage
		noErr(t, json.Unmarshal(doc, &top))
		for _, k := range []string{"schema_version", "session", "artifacts", "traces", "runs", "verifications", "subagent_tasks", "handoff", "runtime"} {
			if _, ok := top[k]; !ok {
				t.Fatalf("envelope lacks %q: %s", k, doc)
			}
		}
		if string(top["schema_version"]) != "1" {
			t.Fatalf("schema_version = %s", top["schema_version"])
		}
		var inner map[string]json.RawMessage
		noErr(t, json.Unmarshal(top["session"], &inner))
		for _, k := range []string{"session_id", "messages", "agent", "metadata", "workspace", "files"} {
			if _, ok := inner[k]; !ok {
				t.Fatalf("envelope session lacks %q", k)
			}
		}
		for _, k := range []string{"artifacts", "runs", "handoff"} {
			if _, ok := inner[k]; ok {
				t.Fatalf("envelope session duplicates %q", k)
			}
		}
		_, err = e.Export(ctx, "nope")
		wantCode(t, err, session.CodeNotFound)
	})
}

func TestImport(t *testing.T) {
	bare := `{"session_id":"old","created_at":"2024-01-01T00:00:00Z","messages":[{"a":  1},"x"],"runs":[{"run_id":"r1","status":"completed","started_at":"2024-01-01T00:00:00Z","usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3,"cost":0}, "tool_calls_count":4}]}`
	cases := []struct {
		name     string
		doc      string
		code     session.Code
		sid      string
		messages int
	}{
		{"bare form without version", bare, "", "old", 2},
		{"bare form version 1", strings.Replace(bare, `{"session_id"`, `{"schema_version":1,"session_id"`, 1), "", "old", 2},
		{"bare form future version", strings.Replace(bare, `{"session_id"`, `{"schema_version":2,"session_id"`, 1), session.CodeSchemaUnsupported, "", 0},
		{"envelope", `{"schema_version":1,"session":{"session_id":"env","messages":[1,2,3]},"runs":[{"run_id":"r","status":"running","started_at":"2024-01-01T00:00:00Z","usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0,"cost":0},"tool_calls_count":0}],"artifacts":[{"id":"a","data":"AAE="}]}`, "", "env", 3},
		{"envelope from the future", `{"schema_version":2,"session":{"session_id":"fut","messages":[]}}`, session.CodeSchemaUnsupported, "", 0},
		{"future envelope that also looks bare", `{"schema_version":2,"session_id":"x","session":{"session_id":"x","messages":[]}}`, session.CodeSchemaUnsupported, "", 0},
		{"envelope version 0", `{"schema_version":0,"session":{"session_id":"z"}}`, session.CodeSchemaUnsupported, "", 0},
		{"envelope without version", `{"session":{"session_id":"z"}}`, session.CodeInvalidArgument, "", 0},
		{"envelope with unknown field", `{"schema_version":1,"session":{"session_id":"z"},"loop_checkpoints":[]}`, session.CodeInvalidArgument, "", 0},
		{"envelope with future session", `{"schema_version":1,"session":{"schema_version":9,"session_id":"z"}}`, session.CodeSchemaUnsupported, "", 0},
		{"envelope with null session", `{"schema_version":1,"session":null}`, session.CodeInvalidArgument, "", 0},
		{"existing id", `{"session_id":"exists"}`, session.CodeConflict, "", 0},
		{"not an object", `[1,2]`, session.CodeInvalidArgument, "", 0},
		{"not JSON", `{`, session.CodeInvalidArgument, "", 0},
		{"neither shape", `{"foo":1}`, session.CodeInvalidArgument, "", 0},
		{"bare minimal", `{"session_id":"b","messages":[{"a":1}]}`, "", "b", 1},
		{"bad artifact digest", `{"schema_version":1,"session":{"session_id":"d"},"artifacts":[{"id":"a","sha256":"00","data":"AAE="}]}`, session.CodeInvalidArgument, "", 0},
		{"hostile id", `{"session_id":"../../etc"}`, "", "../../etc", 0},
		{"empty id", `{"session_id":""}`, session.CodeInvalidArgument, "", 0},
	}
	forEachStore(t, func(t *testing.T, f storeFactory) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newEngine(t, f)
				ctx := testkit.Context(t)
				saveDelta(t, e, "exists", msg("u", 1))
				res, err := e.Import(ctx, []byte(tc.doc))
				wantCode(t, err, tc.code)
				if tc.code != "" {
					l, err := e.List(ctx)
					noErr(t, err)
					if len(l) != 1 || l[0].Generation != 1 {
						t.Fatalf("failed import wrote: %+v", l)
					}
					return
				}
				if res.SessionID != tc.sid || res.Generation != 1 {
					t.Fatalf("import = %+v", res)
				}
				got, err := e.ResumeSession(ctx, tc.sid)
				noErr(t, err)
				if got.Snapshot.SchemaVersion != session.SchemaVersion || len(got.Snapshot.Messages) != tc.messages {
					t.Fatalf("imported snapshot: version %d, %d messages", got.Snapshot.SchemaVersion, len(got.Snapshot.Messages))
				}
				if tc.sid == "old" {
					if string(got.Snapshot.Messages[0]) != `{"a":  1}` || got.Snapshot.Runs[0].ToolCallsCount != 4 || got.Snapshot.CreatedAt.Year() != 2024 {
						t.Fatalf("bare form not carried over: %+v", got.Snapshot)
					}
				}
			})
		}
	})
}
