package protocol

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// TestDecodeCheckpointParams: what AppendCheckpointParams writes, the fast
// decoder takes, to the value DecodeParams gives; the generic encoder's
// other layouts (a missing key, an extra one, another order) it leaves to
// DecodeParams; and no byte flipped, cut or added anywhere in an encoding
// makes it take what DecodeParams refuses or decode anything DecodeParams
// would decode otherwise.
func TestDecodeCheckpointParams(t *testing.T) {
	reqs := []api.CheckpointRequest{
		{RunID: "r1", Turn: 1, NewMessages: []session.Value{session.Value(`{"role":"user","content":"hi"}`)}},
		{RunID: "r-2", SessionID: "s", Turn: math.MaxInt64, NewMessages: []session.Value{session.Value(`"x"`), session.Value(strings.Repeat("y", 70000))},
			Usage: session.Usage{InputTokens: -5, OutputTokens: math.MinInt64, TotalTokens: 300, Cost: 0.25}, ToolCallsCount: 1 << 40, State: session.Value(`{"step":1}`)},
		{RunID: "é", SessionID: "", Turn: -1, NewMessages: []session.Value{session.Value("")}, State: session.Value(`[1]`)},
		{RunID: "r", SessionID: "sess", Turn: 24, NewMessages: []session.Value{session.Value(`1`)}, Usage: session.Usage{Cost: math.NaN()}},
	}
	for i, r := range reqs {
		enc := AppendCheckpointParams(nil, &r)
		var want, got api.CheckpointRequest
		if err := Unmarshal(enc, &want); err != nil {
			t.Fatalf("req %d: %v", i, err)
		}
		if !DecodeCheckpointParams(enc, &got) {
			t.Fatalf("req %d: the fast decoder refused AppendCheckpointParams's encoding", i)
		}
		if !sameCheckpoint(got, want) {
			t.Fatalf("req %d: fast %+v, generic %+v", i, got, want)
		}
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		// Most changes land where the heads and keys are: the first and
		// the last bytes (a message's payload is opaque to both decoders).
		pos := func(n int) int {
			if rng.IntN(4) == 0 || n <= 160 {
				return rng.IntN(n)
			}
			if rng.IntN(2) == 0 {
				return rng.IntN(64)
			}
			return n - 1 - rng.IntN(96)
		}
		for range 5000 {
			m := append([]byte(nil), enc...)
			switch rng.IntN(3) {
			case 0:
				m[pos(len(m))] ^= byte(1 << rng.IntN(8))
			case 1:
				m = m[:pos(len(m))]
			case 2:
				at := pos(len(m) + 1)
				m = append(m[:at:at], append([]byte{byte(rng.IntN(256))}, m[at:]...)...)
			}
			checkAgainstGeneric(t, m)
		}
	}
	// The generic encoder's layouts for other values: no state and no
	// messages, a map with the keys in another order, an extra key.
	for _, v := range []any{
		api.CheckpointRequest{RunID: "r", Turn: 1},
		map[string]any{"turn": 1, "run_id": "r", "new_messages": [][]byte{[]byte("1")}, "usage": map[string]any{}, "tool_calls_count": 0},
		map[string]any{"run_id": "r", "turn": 1, "new_messages": [][]byte{[]byte("1")}, "usage": session.Usage{}, "tool_calls_count": 0, "extra": 1},
		// A turn over math.MaxInt64, in the fast layout.
		struct {
			RunID       string        `cbor:"run_id"`
			Turn        uint64        `cbor:"turn"`
			NewMessages [][]byte      `cbor:"new_messages"`
			Usage       session.Usage `cbor:"usage"`
			Tools       int64         `cbor:"tool_calls_count"`
		}{"r", math.MaxUint64, [][]byte{[]byte("1")}, session.Usage{}, 0},
	} {
		enc, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstGeneric(t, enc)
	}
}

// checkAgainstGeneric fails t when the fast decoder takes m and
// DecodeParams refuses it or decodes it to another value.
func checkAgainstGeneric(t *testing.T, m []byte) {
	t.Helper()
	var got, want api.CheckpointRequest
	if !DecodeCheckpointParams(m, &got) {
		return
	}
	if err := DecodeParams(m, &want); err != nil {
		t.Fatalf("the fast decoder took %x, which DecodeParams refuses: %v", m, err)
	}
	if !sameCheckpoint(got, want) {
		t.Fatalf("%x: fast %+v, generic %+v", m, got, want)
	}
}

// sameCheckpoint is reflect.DeepEqual with NaN costs equal.
func sameCheckpoint(a, b api.CheckpointRequest) bool {
	if math.IsNaN(a.Usage.Cost) && math.IsNaN(b.Usage.Cost) {
		a.Usage.Cost, b.Usage.Cost = 0, 0
	}
	return reflect.DeepEqual(a, b)
}

// FuzzDecodeCheckpointParams: whatever the fast decoder takes, DecodeParams
// takes too, to the same value.
func FuzzDecodeCheckpointParams(f *testing.F) {
	for _, r := range []api.CheckpointRequest{
		{RunID: "r", Turn: 1, NewMessages: []session.Value{session.Value(`"m"`)}},
		{RunID: "r", SessionID: "s", Turn: -3, NewMessages: []session.Value{session.Value(`1`), session.Value(`2`)}, Usage: session.Usage{Cost: 1.5}, State: session.Value(`{}`)},
	} {
		f.Add(AppendCheckpointParams(nil, &r))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainstGeneric(t, b) })
}
