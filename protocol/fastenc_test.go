package protocol

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// TestAppendRequestMsgMatchesEncodeRequest: the pooled, hand-encoded
// request is byte for byte what EncodeRequest (reflection) gives, for
// checkpoint params (by value and by pointer) and for any other params, so
// the daemon sees the documented encoding either way.
func TestAppendRequestMsgMatchesEncodeRequest(t *testing.T) {
	big := session.Value(`"` + strings.Repeat("x", 70000) + `"`)
	cps := map[string]api.CheckpointRequest{
		"zero":                   {},
		"usual":                  {RunID: "run-1", Turn: 7, NewMessages: []session.Value{session.Value(`{"role":"user","content":"hi"}`), session.Value(`[1,2]`)}, Usage: session.Usage{InputTokens: 1000, OutputTokens: 200, TotalTokens: 1200, Cost: 0.007}, ToolCallsCount: 3, State: session.Value(`{"step":"after_tool"}`)},
		"session and null state": {RunID: "r", SessionID: "s", Turn: 1, NewMessages: []session.Value{}, State: session.Value(`null`)},
		"negative and extreme":   {RunID: "r", Turn: -1, Usage: session.Usage{InputTokens: math.MinInt64, OutputTokens: math.MaxInt64, TotalTokens: -24, Cost: -1.5}, ToolCallsCount: 1 << 40},
		"heads of every size":    {RunID: strings.Repeat("r", 300), Turn: 65536, NewMessages: []session.Value{big, session.Value(strings.Repeat(" ", 23) + "1"), session.Value(`"` + strings.Repeat("y", 254) + `"`)}, Usage: session.Usage{Cost: math.Inf(1)}, ToolCallsCount: 255},
		"nan cost":               {RunID: "r", Usage: session.Usage{Cost: math.NaN()}},
		"many messages": {RunID: "r", NewMessages: func() []session.Value {
			v := make([]session.Value, 30)
			for i := range v {
				v[i] = session.Value(`{}`)
			}
			return v
		}()},
	}
	for name, cp := range cps {
		for _, params := range []any{cp, &cp} {
			want, err := EncodeRequest(1<<33, api.Checkpoint.Name, params)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendRequestMsg([]byte("junk"), 1<<33, api.Checkpoint.Name, params)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[4:], want) {
				t.Errorf("%s (%T): hand encoding differs: %s", name, params, firstDiff(got[4:], want))
			}
		}
	}
	var nilCP *api.CheckpointRequest
	for name, params := range map[string]any{
		"nil":     nil,
		"nil ptr": nilCP,
		"save":    api.SaveRequest{SessionID: "s"},
		"session": api.SessionParams{SessionID: "s"},
		"empty":   api.Empty{},
		"hello":   api.HelloParams{ProtocolVersion: api.ProtocolVersion, Client: "c"},
	} {
		want, err := EncodeRequest(5, "m", params)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendRequestMsg(nil, 5, "m", params)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %s", name, firstDiff(got, want))
		}
	}
}

// firstDiff describes where got and want part.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d and %d bytes, first difference at %d: got %x, want %x", len(got), len(want), i, got[i:min(i+16, len(got))], want[i:min(i+16, len(want))])
}
