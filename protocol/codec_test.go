package protocol

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// nested returns n nested CBOR arrays around 0.
func nested(n int) []byte {
	return append(bytes.Repeat([]byte{0x81}, n), 0x00)
}

// requestWith returns a request map {id: 1, method: m, params: p} encoded
// by hand, with p raw CBOR.
func requestWith(method string, params []byte) []byte {
	b := []byte{0xa3, 0x62, 'i', 'd', 0x01, 0x66, 'm', 'e', 't', 'h', 'o', 'd'}
	b = append(b, byte(0x60+len(method)))
	b = append(b, method...)
	b = append(b, 0x66, 'p', 'a', 'r', 'a', 'm', 's')
	return append(b, params...)
}

var decodeCases = []struct {
	name    string
	msg     []byte
	wantErr string // substring; "" means success
	wantID  bool   // the id is recovered even on error
}{
	{"status", mustEncode(EncodeRequest(1, api.Status.Name, api.Empty{})), "", true},
	{"save", mustEncode(EncodeRequest(2, api.Save.Name, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{session.Value(`{"a":1}`)}}})), "", true},
	{"no params", []byte{0xa2, 0x62, 'i', 'd', 0x07, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't'}, "", true},
	{"empty", nil, "empty message", false},
	{"garbage", []byte("hello, daemon"), "bad_request", false},
	{"truncated", mustEncode(EncodeRequest(3, api.Status.Name, api.Empty{}))[:10], "truncated", false},
	{"trailing bytes", append(mustEncode(EncodeRequest(3, api.Status.Name, api.Empty{})), 0x00), "after the message", false},
	{"not a map", []byte{0x83, 0x01, 0x02, 0x03}, "wrong type", false},
	{"no id", []byte{0xa1, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't'}, "no uint id", false},
	{"negative id", []byte{0xa2, 0x62, 'i', 'd', 0x20, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't'}, "wrong type", false},
	{"no method", []byte{0xa1, 0x62, 'i', 'd', 0x01}, "no method", true},
	{"empty method", []byte{0xa2, 0x62, 'i', 'd', 0x07, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x60}, "", true},
	{"null method", []byte{0xa2, 0x62, 'i', 'd', 0x07, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0xf6}, "no method", true},
	// Refused for a rule of the decoder, yet well-formed: the id is read.
	{"deep nesting", requestWith("list", nested(MaxNestedLevels+5)), "nesting deeper", true},
	{"very deep nesting", requestWith("list", nested(100000)), "nesting deeper", false}, // past scanMaxLevels
	{"deep nesting before the id", append(append([]byte{0xa3, 0x66, 'p', 'a', 'r', 'a', 'm', 's'}, nested(MaxNestedLevels+5)...), 0x62, 'i', 'd', 0x05, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't'), "nesting deeper", true},
	{"long array", requestWith("list", append([]byte{0x9a, 0x00, 0x10, 0x00, 0x01}, make([]byte, MaxArrayElements+1)...)), "array longer", true},
	{"big map", requestWith("list", bigMap(MaxMapPairs+1)), "map larger", true},
	{"duplicate key", []byte{0xa3, 0x62, 'i', 'd', 0x01, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't', 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't'}, "duplicate map key", true},
	{"duplicate id", []byte{0xa3, 0x62, 'i', 'd', 0x01, 0x62, 'i', 'd', 0x02, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't'}, "duplicate map key", false},
	{"indefinite map", []byte{0xbf, 0x62, 'i', 'd', 0x01, 0xff}, "indefinite", true},
	{"indefinite string", requestWith("list", []byte{0xa1, 0x61, 'k', 0x7f, 0x61, 'a', 0x61, 'b', 0xff}), "indefinite", true},
	{"unterminated indefinite array", requestWith("list", []byte{0x9f, 0x00}), "bad_request", false},
	{"tag", requestWith("list", []byte{0xc1, 0x00}), "tags", true},
	{"tagged id", []byte{0xa2, 0x62, 'i', 'd', 0xc1, 0x01, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x64, 'l', 'i', 's', 't'}, "tags", false},
	{"reserved additional information", requestWith("list", []byte{0x1c}), "bad_request", false},
	{"invalid utf8", []byte{0xa2, 0x62, 'i', 'd', 0x01, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x62, 0xff, 0xfe}, "bad_request", true},
	{"invalid utf8 in an unknown param", requestWith("list", []byte{0xa1, 0x61, 'x', 0x62, 0xff, 0xfe}), "not valid UTF-8", true},
	{"invalid utf8 in a key", requestWith("list", []byte{0xa1, 0x61, 0xff, 0x00}), "not valid UTF-8", true},
	{"huge array header", requestWith("list", []byte{0x9a, 0xff, 0xff, 0xff, 0xff}), "bad_request", false},
}

// bigMap is a CBOR map of n pairs, uint keys to 0, with a 4-byte count.
func bigMap(n int) []byte {
	b := []byte{0xba, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	for i := range n {
		b = append(b, 0x1a, byte(i>>24), byte(i>>16), byte(i>>8), byte(i), 0x00)
	}
	return b
}

func mustEncode(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestDecodeRequest(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeRequest(tc.msg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("DecodeRequest: %v", err)
				}
				if req.ID == nil || (req.Method == "") != (tc.name == "empty method") {
					t.Fatalf("decoded %+v", req)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DecodeRequest error = %v, want ErrBadRequest containing %q", err, tc.wantErr)
			}
			if got := req != nil && req.ID != nil; got != tc.wantID {
				t.Fatalf("id recovered = %v, want %v", got, tc.wantID)
			}
		})
	}
}

// TestValuesTravelAsJSONBytes checks that opaque values are byte strings
// holding the JSON text, returned byte for byte, and times are RFC 3339.
func TestValuesTravelAsJSONBytes(t *testing.T) {
	v := session.Value(`{ "b": 1,  "a": [true] }`)
	when := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in := api.CheckpointRequest{RunID: "r", NewMessages: []session.Value{v}, State: v}
	b, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, append([]byte{0x58, byte(len(v))}, v...)) {
		t.Fatalf("value not encoded as a byte string of its JSON text: % x", b)
	}
	var out api.CheckpointRequest
	if err := Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if string(out.NewMessages[0]) != string(v) || string(out.State) != string(v) {
		t.Fatalf("values changed: %q %q", out.NewMessages[0], out.State)
	}
	tb, err := Marshal(session.StepRecord{StepID: "s", CompletedAt: when})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tb, []byte("2026-01-02T03:04:05.000000006Z")) {
		t.Fatalf("time not RFC 3339 text: % x", tb)
	}
	var sr session.StepRecord
	if err := Unmarshal(tb, &sr); err != nil || !sr.CompletedAt.Equal(when) {
		t.Fatalf("time round trip: %v %v", sr.CompletedAt, err)
	}
}

func TestEmptyContainersAreNotNull(t *testing.T) {
	b, err := EncodeResult(1, api.ListResult{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	res := m["result"].(map[string]any)
	if s, ok := res["sessions"].([]any); !ok || len(s) != 0 {
		t.Fatalf("sessions = %#v, want empty array", res["sessions"])
	}
}

func TestErrorFor(t *testing.T) {
	for _, code := range session.Codes() {
		we := ErrorFor(session.Errorf(code, "boom"))
		if we.Code != string(code) || we.Message != "boom" {
			t.Errorf("%s: %+v", code, we)
		}
	}
	we := ErrorFor(&session.LockedError{Path: "/x/LOCK", PID: 42})
	if we.Code != "locked" || we.Data["pid"] != uint64(42) {
		t.Errorf("locked: %+v", we)
	}
	re := &RemoteError{Code: api.CodeMethodNotFound}
	if !errors.Is(re, ErrMethodNotFound) || CodeOf(re) != api.CodeMethodNotFound {
		t.Errorf("RemoteError does not unwrap to its sentinel")
	}
	if !errors.Is(&RemoteError{Code: session.CodeConflict}, session.ErrConflict) {
		t.Errorf("RemoteError conflict does not unwrap to session.ErrConflict")
	}
}

// FuzzDecodeRequest checks that no input makes the decoder panic or
// misbehave, and that whatever decodes re-encodes and decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		req, err := DecodeRequest(msg)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error does not wrap ErrBadRequest: %v", err)
			}
			return
		}
		var p map[string]any
		_ = DecodeParams(req.Params, &p)
		for _, m := range []any{&api.SaveRequest{}, &api.CheckpointRequest{}, &api.ResumeRunRequest{}} {
			_ = DecodeParams(req.Params, m)
		}
		b, err := EncodeRequest(*req.ID, req.Method, req.Params)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := DecodeRequest(b)
		if err != nil || *again.ID != *req.ID || again.Method != req.Method {
			t.Fatalf("round trip: %+v %v", again, err)
		}
	})
}

// FuzzRequestID checks scanRequest against the CBOR library: it reads an id
// only from a well-formed item, and it reads the id the decoder reads.
func FuzzRequestID(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.msg)
	}
	relaxed, err := cbor.DecOptions{
		MaxNestedLevels:  65535,
		MaxArrayElements: 1<<31 - 1,
		MaxMapPairs:      1<<31 - 1,
		IndefLength:      cbor.IndefLengthAllowed,
		TagsMd:           cbor.TagsAllowed,
		UTF8:             cbor.UTF8DecodeInvalid,
	}.DecMode()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		sc := scanRequest(msg)
		id := sc.id
		isMap := len(msg) > 0 && msg[0]>>5 == 5
		if isMap && len(msg) < 1<<16 && sc.wellFormed != (relaxed.Wellformed(msg) == nil) {
			t.Fatalf("scanRequest: well-formed %v, the CBOR library: %v", sc.wellFormed, relaxed.Wellformed(msg))
		}
		if id != nil {
			if err := relaxed.Wellformed(msg); err != nil {
				t.Fatalf("scanRequest read %d from an item that is not well-formed: %v", *id, err)
			}
		}
		var r Request
		if decMode.Unmarshal(msg, &r) == nil && r.ID != nil && (id == nil || *id != *r.ID) {
			t.Fatalf("scanRequest read id %v, the decoder %d", id, *r.ID)
		}
	})
}

// TestDecodeRequestBorrowed: DecodeRequestBorrowed's params are the bytes
// of the message (a change to the message shows in them), DecodeRequest's a
// copy; both decode the same request, and both refuse the same bad one.
func TestDecodeRequestBorrowed(t *testing.T) {
	msg, err := EncodeRequest(7, "save", map[string]any{"session_id": "s", "pad": strings.Repeat("x", 9000)})
	if err != nil {
		t.Fatal(err)
	}
	copied, err := DecodeRequest(msg)
	if err != nil {
		t.Fatal(err)
	}
	borrowed, err := DecodeRequestBorrowed(msg)
	if err != nil {
		t.Fatal(err)
	}
	if *borrowed.ID != 7 || borrowed.Method != "save" || !bytes.Equal(borrowed.Params, copied.Params) {
		t.Fatalf("borrowed %+v, copied %+v: want the same request", borrowed, copied)
	}
	was := bytes.Clone(copied.Params)
	i := bytes.Index(msg, []byte("xxxx"))
	msg[i] = 'y'
	if !bytes.Contains(borrowed.Params, []byte("yxxx")) {
		t.Fatal("DecodeRequestBorrowed's params do not share the message's bytes")
	}
	if !bytes.Equal(copied.Params, was) {
		t.Fatal("DecodeRequest's params changed with the message: not a copy")
	}
	bad, err := Marshal(map[string]any{"id": uint64(3), "params": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	for name, decode := range map[string]func([]byte) (*Request, error){"copied": DecodeRequest, "borrowed": DecodeRequestBorrowed} {
		r, err := decode(bad)
		if !errors.Is(err, ErrBadRequest) || r == nil || r.ID == nil || *r.ID != 3 {
			t.Fatalf("%s: a request without a method: %+v, %v; want bad_request naming id 3", name, r, err)
		}
	}
}
