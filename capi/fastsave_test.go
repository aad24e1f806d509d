//go:build cgo

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/checked"
)

// canonicalSave has every field the fast path reads.
const canonicalSave = `{"session_id":"langgraph:t","expect_generation":41,"change":{"truncate_messages":3,"delete_artifacts":["w[\"\",\"x\"]","old"],` +
	`"put_artifacts":[{"id":"b[\"\",\"messages\",\"07.0.25\"]","kind":"langgraph","data":"bXNncGFjawCUq2hlbGxv"},` +
	`{"id":"h[\"\"]","kind":"k","name":"n","media_type":"text/plain","run_id":"r","sha256":"","size":0,"data":"","path":"a/b","metadata":{"m":[1,"\u00e9"]}}],` +
	`"append_artifacts":[{"id":"café\t\\/\b\f\n\r","data":"AAEC","metadata":null}],` +
	`"append_messages":[{"ns":"","id":"1f1","parent":null,"md":["msgpack","gqZz"]},"x",null,[]]}}`

// TestFastSaveDecode: the fast path takes the shapes hosts send and
// decodes them exactly as strictDecode does; everything else it leaves to
// strictDecode, so a bad request fails with the same error as before.
func TestFastSaveDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		fast bool   // the fast path decodes it
		err  string // substring of the error; "" means accepted
	}{
		{"canonical", canonicalSave, true, ""},
		{"a put", string(putRequest(3)), true, ""},
		{"spaces", " {\n\"session_id\" : \"s\" ,\"change\" : { \"append_messages\" : [ 1 , {} ] , \"put_artifacts\" : [ { \"id\" : \"a\" , \"data\" : \"eA==\" } ] } } ", true, ""},
		{"empty lists", `{"session_id":"s","change":{"append_messages":[],"put_artifacts":[],"append_artifacts":[],"delete_artifacts":[]}}`, true, ""},
		{"empty change", `{"session_id":"s","change":{}}`, true, ""},
		{"empty object", `{}`, true, ""},
		{"escaped session id", `{"session_id":"s\"\\\/"}`, true, ""},
		{"negative truncate", `{"change":{"truncate_messages":-1}}`, true, ""},
		{"utf-8 id", "{\"change\":{\"put_artifacts\":[{\"id\":\"\xe2\x82\xac\"}]}}", true, ""},
		{"kinds alike", `{"change":{"put_artifacts":[{"id":"a","kind":"k\\b"},{"id":"b","kind":"k\b"},{"id":"c","kind":"k\b"},{"id":"d","kind":"k"},{"id":"e","kind":"k"}]}}`, true, ""},
		// Accepted, but by strictDecode: shapes the fast path leaves alone.
		{"unicode escape in an id", `{"change":{"put_artifacts":[{"id":"caf\u00e9"}]}}`, false, ""},
		{"surrogate escape", `{"session_id":"\ud83d\ude00"}`, false, ""},
		{"lone surrogate", `{"session_id":"\ud83d"}`, false, ""},
		{"snapshot", `{"session_id":"s","snapshot":{"messages":[1]}}`, false, ""},
		{"other change field", `{"change":{"metadata":{"a":1}}}`, false, ""},
		{"key in other case", `{"Session_ID":"s"}`, false, ""},
		{"artifact key in other case", `{"change":{"put_artifacts":[{"ID":"a"}]}}`, false, ""},
		{"null change", `{"session_id":"s","change":null}`, false, ""},
		{"null messages", `{"change":{"append_messages":null}}`, false, ""},
		{"null data", `{"change":{"put_artifacts":[{"id":"a","data":null}]}}`, false, ""},
		{"null artifact", `{"change":{"put_artifacts":[null]}}`, false, ""},
		{"null expect", `{"expect_generation":null}`, false, ""},
		{"escaped data", `{"change":{"put_artifacts":[{"id":"a","data":"eA\u003d\u003d"}]}}`, false, ""},
		{"repeated session id", `{"session_id":"a","session_id":"b"}`, false, ""},
		{"repeated artifact field", `{"change":{"put_artifacts":[{"id":"a","id":"b"}]}}`, false, ""},
		{"repeated change", `{"change":{"append_messages":[1]},"change":{"put_artifacts":[]}}`, false, ""},
		// Refused, with strictDecode's words.
		{"unknown field", `{"session_id":"s","sessions":1}`, false, `unknown field "sessions"`},
		{"unknown change field", `{"change":{"append_message":[1]}}`, false, `unknown field "append_message"`},
		{"unknown artifact field", `{"change":{"put_artifacts":[{"id":"a","bytes":"eA=="}]}}`, false, `unknown field "bytes"`},
		{"bad base64", `{"change":{"put_artifacts":[{"id":"a","data":"e"}]}}`, false, "illegal base64"},
		{"line end in data", "{\"change\":{\"put_artifacts\":[{\"id\":\"a\",\"data\":\"eA\n==\"}]}}", false, "invalid character"},
		{"carriage return in data", "{\"change\":{\"put_artifacts\":[{\"id\":\"a\",\"data\":\"eA==\r\"}]}}", false, "invalid character"},
		{"quote escaped in data", `{"change":{"put_artifacts":[{"id":"a","data":"eA\"=="}]}}`, false, "illegal base64"},
		{"unterminated data", `{"change":{"put_artifacts":[{"id":"a","data":"eA==`, false, "unexpected EOF"},
		{"data not a string", `{"change":{"put_artifacts":[{"id":"a","data":5}]}}`, false, "cannot unmarshal number"},
		{"negative generation", `{"expect_generation":-1}`, false, "cannot unmarshal number -1"},
		{"fractional generation", `{"expect_generation":1.5}`, false, "cannot unmarshal number 1.5"},
		{"generation overflows", `{"expect_generation":18446744073709551616}`, false, "cannot unmarshal number"},
		{"truncate is a string", `{"change":{"truncate_messages":"1"}}`, false, "cannot unmarshal string"},
		{"size is a fraction", `{"change":{"put_artifacts":[{"id":"a","size":1.5}]}}`, false, "cannot unmarshal number 1.5"},
		{"id is a number", `{"change":{"put_artifacts":[{"id":5}]}}`, false, "cannot unmarshal number"},
		{"delete of a number", `{"change":{"delete_artifacts":[5]}}`, false, "cannot unmarshal number"},
		{"artifacts is an object", `{"change":{"put_artifacts":{"id":"a"}}}`, false, "cannot unmarshal object"},
		{"invalid JSON in a message", `{"change":{"append_messages":[{"a":tru}]}}`, false, "invalid character"},
		{"invalid UTF-8 in an id", "{\"change\":{\"put_artifacts\":[{\"id\":\"\xff\"}]}}", false, ""},
		{"trailing data", `{"session_id":"s"} {}`, false, "trailing data"},
		{"unterminated", `{"session_id":"s","change":{"append_messages":[1]}`, false, "unexpected EOF"},
		{"not an object", `[1]`, false, "cannot unmarshal array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p api.SaveRequest
			if got := fastSave([]byte(tc.in), &p); got != tc.fast {
				t.Errorf("fastSave = %v; want %v", got, tc.fast)
			}
			gerr := agree[api.SaveRequest](t, []byte(tc.in))
			if (tc.err == "") != (gerr == "") || !strings.Contains(gerr, tc.err) {
				t.Fatalf("error %q; want one containing %q", gerr, tc.err)
			}
		})
	}
}

// TestFastSaveMutations mutates requests byte by byte and checks that
// decodeParams (fast path first) and strictDecode agree on every result:
// the value, or the error's text. Under -race, which slows the decoders
// several times and has nothing to find in them (one goroutine), it runs a
// fifth of the mutations; `make test-norace` runs them all without it.
func TestFastSaveMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 1))
	alphabet := []byte("{}[]:,\"\\ 0123456789.eE+-nultrfasu_=/AZaz\x01\xff\xc3\t")
	for _, base := range [][]byte{[]byte(canonicalSave), putRequest(5)} {
		for n := 0; n < mutations(30000); n++ {
			agree[api.SaveRequest](t, mutate(r, base, alphabet))
		}
	}
}

// FuzzFastSave: whatever the request, decodeParams (fast path first) and
// strictDecode give the same value or the same error.
func FuzzFastSave(f *testing.F) {
	f.Add([]byte(canonicalSave))
	f.Add(putRequest(1))
	f.Add([]byte(`{"session_id":"s","change":{"append_messages":[{"role":"user","content":"hi"}]}}`))
	f.Add([]byte(`{"session_id":"s","expect_generation":3,"change":{"put_artifacts":[{"id":"w[\"\",\"1\"]","data":"e30="}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		agree[api.SaveRequest](t, b)
	})
}

// TestFastSaveAliasesAndVouches: the decoded messages and artifact
// metadata are the request's own bytes in either mode (values; that
// nothing keeps them past the call is TestEmbeddedParamsNotRetained's),
// and in embedded mode the messages it validated are known to the engine
// (internal/checked), so they are not scanned again.
func TestFastSaveAliasesAndVouches(t *testing.T) {
	for _, forward := range []bool{false, true} {
		b := []byte(canonicalSave)
		ctx, p, err := decodeParamsCtx[api.SaveRequest](context.Background(), b, forward)
		if err != nil {
			t.Fatal(err)
		}
		known := checked.Known(ctx)
		if forward != (known == nil) {
			t.Errorf("forward %v: values known: %v", forward, known != nil)
		}
		for i, m := range p.Change.AppendMessages {
			if !forward && len(m) > 0 && !known(m) {
				t.Errorf("message %d not known", i)
			}
		}
		for _, v := range append(p.Change.AppendMessages, p.Change.PutArtifacts[1].Metadata) {
			if !within(b, v) {
				t.Errorf("forward %v: %s is a copy of the request's bytes", forward, v)
			}
		}
	}
}

// TestSaveBadParamsThroughCall: bad save params fail through cairn_call's
// dispatch with invalid_argument and commit nothing; a good put commits.
func TestSaveBadParamsThroughCall(t *testing.T) {
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeHandle(h) })
	if _, err := call(h, "save", putRequest(1)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"session_id":"langgraph:t","change":{"append_messages":[{"m":2}],"extra":1}}`,
		`{"session_id":"langgraph:t","change":{"append_messages":[{"m":2}]}}{}`,
		`{"session_id":"langgraph:t","change":{"put_artifacts":[{"id":"a","data":"e"}]}}`,
		`{"session_id":"langgraph:t","change":{"append_messages":[{"m":2]}}`,
		"{\"session_id\":\"langgraph:t\",\"change\":{\"append_messages\":[\"\xff\"]}}",
		`{"session_id":"langgraph:t","expect_generation":7,"change":{"append_messages":[1]}}`,
	} {
		if _, err := call(h, "save", []byte(bad)); codeOf(err) != "invalid_argument" && codeOf(err) != "conflict" {
			t.Errorf("save %q: %v; want invalid_argument or conflict", bad, err)
		}
	}
	out, err := call(h, "summary", []byte(`{"session_id":"langgraph:t"}`))
	if err != nil || !strings.Contains(string(out), `"message_count":1`) || !strings.Contains(string(out), `"artifact_count":4`) {
		t.Fatalf("summary after refused saves: %v %s", err, out)
	}
	if _, err := call(h, "save", []byte(`{"session_id":"langgraph:t","expect_generation":1,"change":{"delete_artifacts":["h[\"\"]"],"truncate_messages":0}}`)); err != nil {
		t.Fatalf("good save: %v", err)
	}
	out, err = call(h, "summary", []byte(`{"session_id":"langgraph:t"}`))
	if err != nil || !strings.Contains(string(out), `"message_count":0`) || !strings.Contains(string(out), `"artifact_count":3`) {
		t.Fatalf("summary after a delete and a truncate: %v %s", err, out)
	}
}
