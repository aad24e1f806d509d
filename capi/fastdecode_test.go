//go:build cgo

package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// strictParams is the reference: what decodeParams gave before the fast
// paths, error text included (params of only whitespace are no params).
func strictParams[P any](b []byte) (P, string) {
	var p P
	if len(bytes.TrimSpace(b)) == 0 {
		return p, ""
	}
	if err := strictDecode(b, &p); err != nil {
		return p, session.Errorf(session.CodeInvalidArgument, "params: %v", err).Error()
	}
	return p, ""
}

// agree fails t unless decodeParams (fast path first) and strictParams
// give b the same value or the same error; it returns the error's text.
func agree[P any](t *testing.T, b []byte) string {
	t.Helper()
	got, err := decodeParams[P](b)
	var gerr string
	if err != nil {
		gerr = err.Error()
	}
	want, werr := strictParams[P](b)
	if gerr != werr || (gerr == "" && !reflect.DeepEqual(got, want)) {
		t.Fatalf("%q:\n decodeParams %+v, %q\n strictDecode %+v, %q", b, got, gerr, want, werr)
	}
	return gerr
}

// mutate returns base with one or two bytes replaced, removed or inserted
// (from alphabet).
func mutate(r *rand.Rand, base, alphabet []byte) []byte {
	b := append([]byte(nil), base...)
	for k := 1 + r.IntN(2); k > 0; k-- {
		i := r.IntN(len(b))
		switch r.IntN(3) {
		case 0:
			b[i] = alphabet[r.IntN(len(alphabet))]
		case 1:
			b = append(b[:i], b[i+1:]...)
		default:
			b = append(b[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
		}
	}
	return b
}

const canonicalCheckpoint = `{"run_id":"r-1","turn":3,"new_messages":[{"role":"user","content":"caf\u00e9 x","turn":3},` +
	`{"role":"assistant","content":[{"type":"text","text":"y"},{"type":"tool_use","id":"t3","input":{"path":"a.go","n":-1.5e3}}]}],` +
	`"tool_calls_count":3,"usage":{"input_tokens":3000,"output_tokens":600,"total_tokens":3600,"cost":0.003},"state":{"step":"after_tool","turn":3}}`

// TestFastCheckpointDecode: the fast path takes the shapes hosts send and
// decodes them exactly as strictDecode does; everything else it leaves to
// strictDecode, so a bad request fails with the same error as before.
func TestFastCheckpointDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		fast bool   // the fast path decodes it
		err  string // substring of the error; "" means accepted
	}{
		{"canonical", canonicalCheckpoint, true, ""},
		{"spaces and session", " \n{ \"run_id\" : \"r\" , \"session_id\":\"s\", \"turn\": 1, \"new_messages\" : [ {\"a\" : 1} , \"x\" , null , [ ] ] ,\"state\":null } \t", true, ""},
		{"no messages", `{"run_id":"r","turn":1,"new_messages":[]}`, true, ""},
		{"empty object", `{}`, true, ""},
		{"usage -0 and exponent cost", `{"run_id":"r","usage":{"input_tokens":-0,"cost":1e-3}}`, true, ""},
		{"utf-8 ids", "{\"run_id\":\"caf\xc3\xa9\",\"session_id\":\"\xe2\x82\xac\"}", true, ""},
		// Accepted, but by strictDecode: shapes the fast path leaves alone.
		{"escaped id", `{"run_id":"r\u00e9\n"}`, false, ""},
		{"key in other case", `{"Run_ID":"r","TURN":2}`, false, ""},
		{"null messages", `{"run_id":"r","new_messages":null}`, false, ""},
		{"null run id", `{"run_id":null}`, false, ""},
		{"null usage", `{"usage":null}`, false, ""},
		{"repeated usage merges", `{"usage":{"input_tokens":1},"usage":{"cost":2}}`, false, ""},
		{"repeated turn", `{"turn":1,"turn":2}`, false, ""},
		// Refused, with strictDecode's words.
		{"unknown field", `{"run_id":"r","turns":1}`, false, `unknown field "turns"`},
		{"unknown usage field", `{"usage":{"tokens":1}}`, false, `unknown field "tokens"`},
		{"trailing data", `{"run_id":"r"} {}`, false, "trailing data"},
		{"trailing garbage", `{"run_id":"r"}x`, false, "trailing data"},
		{"turn is a string", `{"turn":"1"}`, false, "cannot unmarshal string"},
		{"turn is a fraction", `{"turn":1.5}`, false, "cannot unmarshal number 1.5"},
		{"turn overflows", `{"turn":9223372036854775808}`, false, "cannot unmarshal number"},
		{"cost overflows", `{"usage":{"cost":1e999}}`, false, "cannot unmarshal number 1e999"},
		{"run id is a number", `{"run_id":5}`, false, "cannot unmarshal number"},
		{"messages is an object", `{"new_messages":{"a":1}}`, false, "cannot unmarshal object"},
		{"invalid JSON inside a message", `{"new_messages":[{"a":tru}]}`, false, "invalid character"},
		{"message cut short", `{"new_messages":[{"a":1]}`, false, "invalid character"},
		{"bad escape in a message", `{"new_messages":["\x"]}`, false, "invalid character"},
		{"not an object", `[1]`, false, "cannot unmarshal array"},
		{"unterminated", `{"run_id":"r"`, false, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p api.CheckpointRequest
			if got := fastCheckpoint([]byte(tc.in), &p); got != tc.fast {
				t.Errorf("fastCheckpoint = %v; want %v", got, tc.fast)
			}
			gerr := agree[api.CheckpointRequest](t, []byte(tc.in))
			if (tc.err == "") != (gerr == "") || !strings.Contains(gerr, tc.err) {
				t.Fatalf("error %q; want one containing %q", gerr, tc.err)
			}
		})
	}
}

// TestFastCheckpointMutations mutates a request byte by byte and checks
// that decodeParams (fast path first) and strictDecode agree on every
// result: the value, or the error's text.
func TestFastCheckpointMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	alphabet := []byte("{}[]:,\"\\ 0123456789.eE+-nultrfas_\x01\xff\xc3\t")
	base := []byte(canonicalCheckpoint)
	for n := 0; n < mutations(50000); n++ {
		agree[api.CheckpointRequest](t, mutate(r, base, alphabet))
	}
}

// mutations is how many of n mutations a mutation test runs: a fifth under
// -race (see TestFastSaveMutations).
func mutations(n int) int {
	if raceEnabled {
		return n / 5
	}
	return n
}

// TestFastCheckpointAliases: the decoded messages and state are the
// request's own bytes, not copies (values); that nothing keeps them past
// the call is TestEmbeddedParamsNotRetained's.
func TestFastCheckpointAliases(t *testing.T) {
	b := []byte(canonicalCheckpoint)
	p, err := decodeParams[api.CheckpointRequest](b)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append(p.NewMessages, p.State) {
		if !within(b, v) {
			t.Errorf("%s is a copy of the request's bytes", v)
		}
	}
}

// within reports whether v is a part of b's memory.
func within(b, v []byte) bool {
	p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(v))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return len(v) > 0 && p >= lo && p+uintptr(len(v)) <= lo+uintptr(len(b))
}

// TestCheckpointBadParamsThroughCall: bad checkpoint params fail through
// cairn_call's dispatch with invalid_argument and commit nothing.
func TestCheckpointBadParamsThroughCall(t *testing.T) {
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeHandle(h) })
	if _, err := call(h, "save", []byte(`{"session_id":"s","change":{"append_messages":[{"m":1}]}}`)); err != nil {
		t.Fatal(err)
	}
	out, err := call(h, "beginRun", []byte(`{"session_id":"s","run_id":"r"}`))
	if err != nil {
		t.Fatalf("beginRun: %v %s", err, out)
	}
	for _, bad := range []string{
		`{"run_id":"r","turn":1,"new_messages":[{"m":2}],"extra":1}`,
		`{"run_id":"r","turn":1,"new_messages":[{"m":2}]}{}`,
		`{"run_id":"r","turn":"1","new_messages":[{"m":2}]}`,
		`{"run_id":"r","turn":1,"new_messages":[{"m":2]}`,
		"{\"run_id\":\"r\",\"turn\":1,\"new_messages\":[\"\xff\"]}",
	} {
		if _, err := call(h, "checkpoint", []byte(bad)); codeOf(err) != "invalid_argument" {
			t.Errorf("checkpoint %q: %v; want invalid_argument", bad, err)
		}
	}
	out, err = call(h, "summary", []byte(`{"session_id":"s"}`))
	if err != nil || !strings.Contains(string(out), `"message_count":1`) {
		t.Fatalf("summary after refused checkpoints: %v %s", err, out)
	}
	if _, err := call(h, "checkpoint", []byte(`{"run_id":"r","turn":1,"new_messages":[{"m":2}]}`)); err != nil {
		t.Fatalf("good checkpoint: %v", err)
	}
}

// BenchmarkCheckpointDecode compares the two decoders on the request of
// one agent turn (bench/agent's: messages of about 2 and 6 KB).
func BenchmarkCheckpointDecode(b *testing.B) {
	x, y, z := strings.Repeat("x", 2000), strings.Repeat("y", 3000), strings.Repeat("z", 3000)
	req := fmt.Appendf(nil, `{"run_id":"run-1","turn":7,"new_messages":[{"role":"user","content":%q,"turn":7},`+
		`{"role":"assistant","content":[{"type":"text","text":%q},{"type":"tool_use","id":"t7","name":"edit","input":{"path":"src/a.go","patch":%q}}]}],`+
		`"tool_calls_count":7,"usage":{"input_tokens":7000,"output_tokens":1400,"total_tokens":8400,"cost":0.007},"state":{"step":"after_tool","turn":7}}`, x, y, z)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		for b.Loop() {
			if _, err := decodeParams[api.CheckpointRequest](req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		for b.Loop() {
			var p api.CheckpointRequest
			if err := strictDecode(req, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
