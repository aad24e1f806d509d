package protocol

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn/api"
)

// checkpointResults are results whose integers take every head size.
var checkpointResults = []api.CheckpointResult{
	{},
	{Generation: 23, MessageCount: 24},
	{Generation: 255, MessageCount: -1},
	{Generation: 256, MessageCount: -25},
	{Generation: 65535, MessageCount: 65536},
	{Generation: 1 << 32, MessageCount: math.MinInt64},
	{Generation: math.MaxUint64, MessageCount: math.MaxInt64},
}

// TestEncodeResultCheckpointMatchesEncoder: a checkpoint's answer, written
// by hand, is byte for byte what the encoder writes.
func TestEncodeResultCheckpointMatchesEncoder(t *testing.T) {
	for _, id := range []uint64{0, 23, 24, 1 << 20, math.MaxUint64} {
		for _, r := range checkpointResults {
			got, err := EncodeResult(id, r)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Marshal(successMsg{ID: id, Result: r})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("id %d, %+v: got %x, the encoder writes %x", id, r, got, want)
			}
		}
	}
}

// genericAnswer is what the client's generic path makes of an answer: the
// envelope decoded into inbound, then its result decoded into a
// checkpoint's result. ok is false when the envelope does not decode or is
// not a success answer.
func genericAnswer(msg []byte) (id uint64, res api.CheckpointResult, resErr error, ok bool) {
	var in inbound
	if err := Unmarshal(msg, &in); err != nil || in.ID == nil || in.Event != "" || in.Error != nil {
		return 0, res, nil, false
	}
	return *in.ID, res, DecodeParams(in.Result, &res), true
}

// TestDecodeAnswerAgainstGeneric: an answer EncodeResult writes, the
// client's fast path takes, to the id and result the generic path gives;
// and no byte flipped, cut or added anywhere in one makes the fast path
// take what the generic path refuses or read anything else from it.
func TestDecodeAnswerAgainstGeneric(t *testing.T) {
	msgs := [][]byte{}
	for i, r := range checkpointResults {
		msg, err := EncodeResult(uint64(i)*1000003, r)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg)
	}
	// Other results, other layouts: the encoder's.
	for _, v := range []any{
		successMsg{ID: 7, Result: map[string]any{"message_count": 1, "generation": 2}},
		successMsg{ID: 8, Result: map[string]any{"generation": 2, "message_count": 1, "x": "y"}},
		successMsg{ID: 9, Result: struct{}{}},
		successMsg{ID: 10, Result: []any{"a", 1, -2.5, map[string]any{"b": []byte("c")}}},
		failureMsg{ID: new(uint64), Error: WireError{Code: "not_found", Message: "no"}},
		Push{Event: "e", Data: map[string]any{"generation": 1}},
	} {
		msg, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg)
	}
	for i, msg := range msgs {
		checkAnswer(t, msg)
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		for range 3000 {
			checkAnswer(t, mutated(rng, msg, rng.IntN(3)))
		}
	}
}

// checkAnswer holds the fast path to the generic one on msg.
func checkAnswer(t *testing.T, msg []byte) {
	t.Helper()
	id, result, fast := decodeAnswer(msg)
	gid, gres, gerr, generic := genericAnswer(msg)
	if fast && !generic {
		t.Fatalf("%x: the fast path took an answer the generic path refuses", msg)
	}
	if !fast {
		return
	}
	if id != gid {
		t.Fatalf("%x: id %d, generic %d", msg, id, gid)
	}
	var res api.CheckpointResult
	_, err := decodeResult(result, &res, false)
	if (err == nil) != (gerr == nil) {
		t.Fatalf("%x: result error %v, generic %v", msg, err, gerr)
	}
	if err == nil && !reflect.DeepEqual(res, gres) {
		t.Fatalf("%x: result %+v, generic %+v", msg, res, gres)
	}
	var direct api.CheckpointResult
	if decodeCheckpointResult(result, &direct) && (gerr != nil || direct != gres) {
		t.Fatalf("%x: the fast result decoder took %+v, generic %+v (%v)", msg, direct, gres, gerr)
	}
}

// TestDecodeAnswerTakesWhatTheDaemonWrites: the fast paths are taken for
// the answer cairnd writes every checkpoint (or they save nothing).
func TestDecodeAnswerTakesWhatTheDaemonWrites(t *testing.T) {
	for _, r := range checkpointResults {
		msg, _ := EncodeResult(42, r)
		id, result, ok := decodeAnswer(msg)
		var got api.CheckpointResult
		if !ok || id != 42 || !decodeCheckpointResult(result, &got) || got != r {
			t.Fatalf("%+v: fast paths refused or misread %x", r, msg)
		}
	}
}

// TestDecodeCheckpointResultAgainstGeneric: on a result alone (as a
// caller might hand it, without decodeAnswer's check that it is one item),
// the fast result decoder takes nothing DecodeParams refuses and reads
// nothing else from it.
func TestDecodeCheckpointResultAgainstGeneric(t *testing.T) {
	for i, r := range checkpointResults {
		enc := appendCheckpointResult(nil, &r)
		rng := rand.New(rand.NewPCG(uint64(i), 13))
		for k := range 3000 {
			m := mutated(rng, enc, k%4)
			var fast, generic api.CheckpointResult
			gerr := DecodeParams(m, &generic)
			if decodeCheckpointResult(m, &fast) && (gerr != nil || fast != generic) {
				t.Fatalf("%x: fast %+v, generic %+v (%v)", m, fast, generic, gerr)
			}
		}
	}
}

// mutated returns a copy of b changed as how says: 0 one bit flipped, 1
// cut short, 2 one random byte inserted, anything else unchanged.
func mutated(rng *rand.Rand, b []byte, how int) []byte {
	m := append([]byte(nil), b...)
	switch how {
	case 0:
		m[rng.IntN(len(m))] ^= byte(1 << rng.IntN(8))
	case 1:
		m = m[:rng.IntN(len(m))]
	case 2:
		at := rng.IntN(len(m) + 1)
		m = append(m[:at:at], append([]byte{byte(rng.IntN(256))}, m[at:]...)...)
	}
	return m
}
