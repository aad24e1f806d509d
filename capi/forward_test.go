//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestForwardCheckpointBorrowsRequest: in daemon mode a checkpoint's
// messages and state are not copied out of the caller's request (C memory
// the host frees after the call) but encoded for the daemon before the call
// returns; overwriting the request afterwards changes nothing stored, and a
// request the fast decoder refuses still fails as invalid_argument.
func TestForwardCheckpointBorrowsRequest(t *testing.T) {
	h := daemonHandle(t)
	if _, err := call(h, "save", []byte(`{"session_id":"s","change":{"append_messages":[{"role":"system","content":"sys"}]}}`)); err != nil {
		t.Fatal(err)
	}
	out, err := call(h, "beginRun", []byte(`{"session_id":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	var br struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(out, &br); err != nil {
		t.Fatal(err)
	}
	req := []byte(fmt.Sprintf(`{"run_id": %q, "turn": 1, "new_messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}], "usage": {"input_tokens": 3}, "tool_calls_count": 0, "state": {"step": 1}}`, br.RunID))
	if _, err := call(h, "checkpoint", req); err != nil {
		t.Fatal(err)
	}
	for i := range req {
		if req[i] == 'h' || req[i] == 'u' {
			req[i] = 'X'
		}
	}
	out, err = call(h, "messages", []byte(`{"session_id":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"content":"hello"`, `"content":"hi"`, `"role":"user"`} {
		if !strings.Contains(strings.ReplaceAll(string(out), " ", ""), want) {
			t.Fatalf("messages after the request was overwritten: %s, want %s", out, want)
		}
	}
	bad := []byte(fmt.Sprintf(`{"run_id": %q, "turn": 2, "new_messages": [{"role": "user"}], "usage": {}, "tool_calls_count": 0, "extra": 1}`, br.RunID))
	if _, err := call(h, "checkpoint", bad); codeOf(err) != "invalid_argument" {
		t.Fatalf("checkpoint with an unknown field in daemon mode: %v, want invalid_argument", err)
	}
}
