package api_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// genJSON draws a JSON document: nested objects and arrays of strings (with
// characters encoding/json escapes), numbers, booleans and null.
func genJSON(t *rapid.T, depth int) any {
	kind := rapid.IntRange(0, 6).Draw(t, "kind")
	if depth >= 3 && kind >= 5 {
		kind = 2
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"<a&b>", "\u2028", "\"\\/\n", ""})).Draw(t, "string")
	case 3:
		return rapid.Int64().Draw(t, "int")
	case 4:
		return rapid.Float64().Filter(func(f float64) bool { return f == f && f-f == 0 }).Draw(t, "float")
	case 5:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		l := make([]any, n)
		for i := range l {
			l[i] = genJSON(t, depth+1)
		}
		return l
	default:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		m := make(map[string]any, n)
		for i := 0; i < n; i++ {
			m[rapid.String().Draw(t, "key")] = genJSON(t, depth+1)
		}
		return m
	}
}

// genValue draws a stored value as a host may have sent it: compact or
// indented, '<', '>' and '&' escaped or not, with whitespace around it.
func genValue(t *rapid.T) session.Value {
	v := genJSON(t, 0)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(rapid.Bool().Draw(t, "escapeHTML"))
	if rapid.Bool().Draw(t, "indent") {
		enc.SetIndent(" ", "\t")
	}
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if rapid.Bool().Draw(t, "trim") {
		b = bytes.TrimSpace(b)
	}
	return session.Value(b)
}

// decode parses b keeping numbers as their text.
func decode(t *rapid.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	return v
}

// TestMessagesResultAppendJSON checks that AppendJSON encodes the same JSON
// as encoding/json (semantically: stored values keep their bytes), appends
// to what b holds, never writes a null list, and stays within JSONSize.
func TestMessagesResultAppendJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := api.MessagesResult{
			SessionID: rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z0-9_-]{1,20}`),
				rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) })).Draw(t, "session_id"),
			Generation: rapid.Uint64().Draw(t, "generation"),
			Total:      rapid.Int64().Draw(t, "total"),
			From:       rapid.Int64().Draw(t, "from"),
			Next:       rapid.Int64().Draw(t, "next"),
			More:       rapid.Bool().Draw(t, "more"),
		}
		if n := rapid.IntRange(-1, 5).Draw(t, "messages"); n >= 0 {
			r.Messages = make([]session.Value, n)
			for i := range r.Messages {
				// An empty value (never stored) is null, as in encoding/json.
				if rapid.IntRange(0, 9).Draw(t, "empty") > 0 {
					r.Messages[i] = genValue(t)
				}
			}
		}
		// encoding/json writes a nil list as null, where the schema (and
		// AppendJSON) has [].
		want := r
		if want.Messages == nil {
			want.Messages = []session.Value{}
		}
		got := checkAppendJSON(t, r, want)
		if msgs, ok := decode(t, got).(map[string]any)["messages"].([]any); !ok || len(msgs) != len(r.Messages) {
			t.Fatalf("messages is not a list of %d: %s", len(r.Messages), got)
		}
	})
}

// TestArtifactsByIDResultAppendJSON checks AppendJSON against encoding/json
// as TestMessagesResultAppendJSON does, for artifacts with every field set
// or empty.
func TestArtifactsByIDResultAppendJSON(t *testing.T) {
	str := func(t *rapid.T, label string) string {
		return rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringMatching(`[a-z0-9:_"\\<>&\[\]-]{1,20}`)).Draw(t, label)
	}
	rapid.Check(t, func(t *rapid.T) {
		r := api.ArtifactsByIDResult{
			SessionID:  str(t, "session_id"),
			Generation: rapid.Uint64().Draw(t, "generation"),
			Next:       rapid.Int64().Draw(t, "next"),
		}
		if n := rapid.IntRange(-1, 4).Draw(t, "artifacts"); n >= 0 {
			r.Artifacts = make([]session.Artifact, n)
			for i := range r.Artifacts {
				a := session.Artifact{
					ID: str(t, "id"), Kind: str(t, "kind"), Name: str(t, "name"), MediaType: str(t, "media_type"),
					RunID: str(t, "run_id"), SHA256: str(t, "sha256"), Size: rapid.Int64().Draw(t, "size"),
					Data: rapid.SliceOf(rapid.Byte()).Draw(t, "data"), Path: str(t, "path"),
				}
				if rapid.Bool().Draw(t, "metadata") {
					a.Metadata = genValue(t)
				}
				r.Artifacts[i] = a
			}
		}
		want := r
		if want.Artifacts == nil {
			want.Artifacts = []session.Artifact{}
		}
		checkAppendJSON(t, r, want)
	})
}

// checkAppendJSON checks r's AppendJSON after a drawn prefix: the prefix
// kept, at most JSONSize bytes (the C API encodes into a buffer of that
// size), valid JSON, and the same JSON as json.Marshal(want) gives, numbers
// compared as their text (stored values keep their bytes). It returns what
// AppendJSON appended.
func checkAppendJSON(t *rapid.T, r api.JSONAppender, want any) []byte {
	prefix := []byte(rapid.SampledFrom([]string{"", "[", `{"x":`}).Draw(t, "prefix"))
	out := r.AppendJSON(append([]byte(nil), prefix...))
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("AppendJSON lost the prefix %q: %s", prefix, out)
	}
	got := out[len(prefix):]
	if len(got) > r.JSONSize() {
		t.Fatalf("AppendJSON wrote %d bytes, over JSONSize %d: %s", len(got), r.JSONSize(), got)
	}
	if !json.Valid(got) {
		t.Fatalf("AppendJSON wrote invalid JSON: %s", got)
	}
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := decode(t, got), decode(t, wb); !reflect.DeepEqual(g, w) {
		t.Fatalf("AppendJSON and json.Marshal differ:\n got %s\nwant %s", got, wb)
	}
	return got
}
