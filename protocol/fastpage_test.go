package protocol

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// pages are MessagesResult values as cairnd answers them.
var pages = []api.MessagesResult{
	{SessionID: "s", Generation: 3, Total: 2, Next: 2, Messages: []session.Value{json.RawMessage(`{"a":1}`), json.RawMessage(`"x"`)}},
	{SessionID: "é 会话", Generation: math.MaxUint64, Total: math.MaxInt64, From: 1 << 40, Next: 1<<40 + 1, More: true, Messages: []session.Value{json.RawMessage(strings.Repeat("7", 70000))}},
	{SessionID: "empty", Generation: 1, Messages: []session.Value{}},
	{SessionID: "", Generation: 24, Total: 255, From: 23, Next: 256, More: true, Messages: []session.Value{json.RawMessage(`null`), json.RawMessage(`[]`), json.RawMessage(`{"k":"v"}`)}},
}

// TestDecodeMessagesBorrowedTakesWhatTheDaemonWrites: the borrowed decode
// reads every page as cairnd encodes it, to what the generic decoder
// reads, with each message a slice of the answer's own bytes.
func TestDecodeMessagesBorrowedTakesWhatTheDaemonWrites(t *testing.T) {
	for _, p := range pages {
		msg, err := EncodeResult(9, p)
		if err != nil {
			t.Fatal(err)
		}
		id, result, ok := decodeAnswer(msg)
		if !ok || id != 9 {
			t.Fatalf("%+v: decodeAnswer refused %x", p, msg)
		}
		var fast, generic api.MessagesResult
		if err := DecodeParams(result, &generic); err != nil {
			t.Fatal(err)
		}
		if !decodeMessagesBorrowed(result, &fast) {
			t.Fatalf("%.80s: the borrowed decode refused %x", p.SessionID, msg)
		}
		if !reflect.DeepEqual(fast, generic) {
			t.Fatalf("borrowed %+v, generic %+v", fast, generic)
		}
		lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(result))), uintptr(unsafe.Pointer(unsafe.SliceData(result)))+uintptr(len(result))
		for i, m := range fast.Messages {
			if at := uintptr(unsafe.Pointer(unsafe.SliceData(m))); len(m) > 0 && (at < lo || at+uintptr(len(m)) > hi) {
				t.Fatalf("message %d is a copy, not a slice of the answer", i)
			}
		}
	}
}

// TestDecodeMessagesBorrowedAgainstGeneric: on results changed at random
// (a bit flipped, cut short, a byte inserted) and on other layouts of the
// same fields, the borrowed decode takes nothing the generic decoder
// refuses and reads nothing else from it.
func TestDecodeMessagesBorrowedAgainstGeneric(t *testing.T) {
	var inputs [][]byte
	for i, p := range pages {
		enc, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(i), 17))
		for k := range 3000 {
			inputs = append(inputs, mutated(rng, enc, k%4))
		}
		// The same fields as a map: another order, and a key more.
		other, err := Marshal(map[string]any{"messages": p.Messages, "more": p.More, "next": p.Next, "from": p.From, "total": p.Total, "generation": p.Generation, "session_id": p.SessionID})
		if err != nil {
			t.Fatal(err)
		}
		extra, err := Marshal(map[string]any{"session_id": p.SessionID, "x": 1})
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, other, extra)
	}
	for _, m := range inputs {
		var fast, generic api.MessagesResult
		gerr := DecodeParams(m, &generic)
		if decodeMessagesBorrowed(m, &fast) && (gerr != nil || !reflect.DeepEqual(fast, generic)) {
			t.Fatalf("%x: borrowed %+v, generic %+v (%v)", m, fast, generic, gerr)
		}
	}
}
