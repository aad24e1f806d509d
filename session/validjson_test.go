package session

import (
	"strings"
	"testing"
)

// TestNormalizeRefusesBadValues: every JSON value of a change is checked
// (JSON syntax and UTF-8), whoever built the change.
func TestNormalizeRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Change
		want string // "" means accepted
	}{
		{"valid messages", Change{AppendMessages: []Value{Value(`{"role":"user","content":"caf\u00e9"}`), Value("\"caf\xc3\xa9\"")}}, ""},
		{"truncated message", Change{AppendMessages: []Value{Value(`{}`), Value(`{"role":"user"`)}}, "messages[1]: message is not valid JSON"},
		{"trailing data", Change{AppendMessages: []Value{Value(`{} {}`)}}, "messages[0]: message is not valid JSON"},
		{"bad escape", Change{AppendMessages: []Value{Value(`"\x"`)}}, "messages[0]: message is not valid JSON"},
		{"control byte in a string", Change{AppendMessages: []Value{Value("\"a\x01\"")}}, "messages[0]: message is not valid JSON"},
		{"not UTF-8", Change{AppendMessages: []Value{Value("\"\xff\"")}}, "messages[0]: message is not valid JSON: it is not UTF-8"},
		{"empty message", Change{AppendMessages: []Value{nil}}, "messages[0]: message is empty"},
		{"checkpoint state", Change{Checkpoint: &LoopCheckpoint{RunID: "r", State: Value(`{"a":}`)}}, "checkpoint state is not valid JSON"},
		{"agent value", Change{Agent: map[string]Value{"model": Value(`tru`)}}, "agent.model is not valid JSON"},
		{"deep nesting", Change{AppendMessages: []Value{Value(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))}}, "messages[0]: message is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Normalize(&tc.c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Normalize: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("Normalize accepted it; want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Normalize: %v; want %q", err, tc.want)
			case tc.want != "" && CodeOf(err) != CodeInvalidArgument:
				t.Fatalf("Normalize: code %s; want invalid_argument", CodeOf(err))
			}
		})
	}
}

// TestNormalizeKnownSkipsOnlyKnown: NormalizeKnown leaves out exactly the
// values known vouches for.
func TestNormalizeKnownSkipsOnlyKnown(t *testing.T) {
	bad, state := Value(`{"a":tru}`), Value(`{"k":}`)
	vouched := func(v Value) bool { return len(v) > 0 && &v[0] == &bad[0] || len(v) > 0 && &v[0] == &state[0] }
	c := func() *Change {
		return &Change{AppendMessages: []Value{Value(`{}`), bad}, Checkpoint: &LoopCheckpoint{RunID: "r", State: state}}
	}
	if err := NormalizeKnown(c(), vouched); err != nil {
		t.Fatalf("NormalizeKnown with both bad values vouched for: %v", err)
	}
	for _, k := range []func(Value) bool{nil, func(Value) bool { return false }, func(v Value) bool { return &v[0] == &bad[0] }} {
		if err := NormalizeKnown(c(), k); CodeOf(err) != CodeInvalidArgument {
			t.Fatalf("NormalizeKnown: %v; want invalid_argument", err)
		}
	}
}
