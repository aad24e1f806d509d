package api_test

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// TestResumeRunResultAppendJSON checks ResumeRunResult's AppendJSON against
// encoding/json as TestMessagesResultAppendJSON does, with costs across
// the range encoding/json writes with and without an exponent, and no
// encoding (nil) for a cost encoding/json refuses.
func TestResumeRunResultAppendJSON(t *testing.T) {
	str := func(t *rapid.T, label string) string {
		return rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringMatching(`[a-z0-9:_"\\<>&/.-]{1,20}`)).Draw(t, label)
	}
	rapid.Check(t, func(t *rapid.T) {
		r := api.ResumeRunResult{
			RunID: str(t, "run_id"), ResumedFrom: str(t, "resumed_from"), SessionID: str(t, "session_id"),
			Turn: rapid.Int64().Draw(t, "turn"), ToolCallsCount: rapid.Int64().Draw(t, "tool_calls_count"),
			Usage: session.Usage{
				InputTokens: rapid.Int64().Draw(t, "in"), OutputTokens: rapid.Int64().Draw(t, "out"), TotalTokens: rapid.Int64().Draw(t, "total"),
				Cost: rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1e-6, 9.99e-7, 1e-7, 1e21, 9.99e20, -1e-9, 0.001, 123.456, math.MaxFloat64, math.SmallestNonzeroFloat64})).Draw(t, "cost"),
			},
			FilesTracked: rapid.Bool().Draw(t, "files_tracked"),
		}
		if rapid.Bool().Draw(t, "state") {
			r.State = genValue(t)
		}
		if n := rapid.IntRange(-1, 5).Draw(t, "messages"); n >= 0 {
			r.Messages = make([]session.Value, n)
			for i := range r.Messages {
				if rapid.IntRange(0, 9).Draw(t, "empty") > 0 {
					r.Messages[i] = genValue(t)
				}
			}
		}
		if n := rapid.IntRange(-1, 3).Draw(t, "files"); n >= 0 {
			r.FilesTouchedAfterCheckpoint = make([]string, n)
			for i := range r.FilesTouchedAfterCheckpoint {
				r.FilesTouchedAfterCheckpoint[i] = str(t, "file")
			}
		}
		// encoding/json writes a nil list as null, where the schema (and
		// AppendJSON) has []; decode keeps numbers as their text, so the
		// cost is encoding/json's to the letter.
		want := r
		if want.Messages == nil {
			want.Messages = []session.Value{}
		}
		if want.FilesTouchedAfterCheckpoint == nil {
			want.FilesTouchedAfterCheckpoint = []string{}
		}
		checkAppendJSON(t, r, want)
	})
	for _, cost := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := api.ResumeRunResult{RunID: "r", Usage: session.Usage{Cost: cost}}
		if b := r.AppendJSON([]byte("x")); b != nil {
			t.Errorf("cost %v: AppendJSON wrote %s; want nil, for encoding/json to refuse", cost, b)
		}
	}
}

// TestResumeSessionResultAppendJSON checks ResumeSessionResult's
// AppendJSON against encoding/json as TestMessagesResultAppendJSON does,
// with the snapshot's other parts present or not on either side of the
// messages, and no encoding (nil) without a snapshot or for a value
// encoding/json refuses.
func TestResumeSessionResultAppendJSON(t *testing.T) {
	str := func(t *rapid.T, label string) string {
		return rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringMatching(`[a-z0-9:_"\\<>&/.-]{1,20}`)).Draw(t, label)
	}
	at := time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		s := &session.Snapshot{SchemaVersion: session.SchemaVersion, SessionID: str(t, "session_id"),
			Generation: rapid.Uint64().Draw(t, "generation"), CreatedAt: at, UpdatedAt: at.Add(time.Hour)}
		if rapid.Bool().Draw(t, "head") {
			s.Workspace = &session.Workspace{Root: str(t, "root"), GitDirty: true}
			s.Agent = map[string]session.Value{"name": genValue(t)}
			s.Metadata = map[string]session.Value{str(t, "key"): genValue(t), "messages": session.Value(`[]`)}
		}
		if n := rapid.IntRange(-1, 5).Draw(t, "messages"); n >= 0 {
			s.Messages = make([]session.Value, n)
			for i := range s.Messages {
				if rapid.IntRange(0, 9).Draw(t, "empty") > 0 {
					s.Messages[i] = genValue(t)
				}
			}
		}
		if rapid.Bool().Draw(t, "tail") {
			s.Artifacts = []session.Artifact{{ID: str(t, "art"), Data: rapid.SliceOf(rapid.Byte()).Draw(t, "data")}}
			s.Traces = []session.Trace{{Seq: 1, Time: at, Type: "tool", Data: genValue(t)}}
			s.Runs = []session.Run{{RunID: "r", Status: session.RunRunning, StartedAt: at, Usage: session.Usage{Cost: rapid.Float64().Draw(t, "cost")}}}
			s.Handoff = &session.Handoff{Done: []string{str(t, "done")}}
		}
		r := api.ResumeSessionResult{Snapshot: s, Generation: s.Generation, MessageCount: rapid.Int64().Draw(t, "count"),
			Drift: api.Drift{Tracked: rapid.Bool().Draw(t, "tracked"), Added: []string{str(t, "added")}}}
		if rapid.Bool().Draw(t, "interrupted") {
			r.InterruptedRuns = []api.InterruptedRun{{RunID: "r", Status: session.RunInterrupted, CheckpointedAt: at}}
			r.Processes = []api.ProcessState{{Name: str(t, "process"), State: "healthy"}}
		}
		// encoding/json writes nil messages as null, where the schema (and
		// AppendJSON) has [].
		want := r
		if s.Messages == nil {
			ws := *s
			ws.Messages = []session.Value{}
			want.Snapshot = &ws
		}
		checkAppendJSON(t, r, want)
	})
	for what, r := range map[string]api.ResumeSessionResult{
		"no snapshot": {},
		"a NaN cost":  {Snapshot: &session.Snapshot{Runs: []session.Run{{RunID: "r", Usage: session.Usage{Cost: math.NaN()}}}}},
	} {
		if b := r.AppendJSON([]byte("x")); b != nil {
			t.Errorf("%s: AppendJSON wrote %s; want nil, for encoding/json to answer", what, b)
		}
	}
}
