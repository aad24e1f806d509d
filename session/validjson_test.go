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
