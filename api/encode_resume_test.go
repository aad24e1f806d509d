package api_test

import (
	"math"
	"testing"

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
